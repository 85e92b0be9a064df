"""After the schedule: wait for quiescence, then gather what the outside world saw (the
workload's answers, the emulator's ledger, our API's answers after quiescence) into the
checker's :class:`Observed`, and judge (``tests/support/checker.py``)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime
from typing import Any, cast

import redis
import stripe  # noqa: TID251 - the checker reads Stripe's objects through the SDK
from sqlalchemy import select

from adapters.db.models import EventRow
from adapters.messaging.config import CONSUMED_QUEUES
from domain.subscriptions.subscription import SubscriptionState
from stripe_emulator import EmulatorAdmin
from tests.emulator.support import sdk_client
from tests.schedules.plan import PLAN_AMOUNTS
from tests.schedules.system import System
from tests.schedules.workload import STAGING, History
from tests.support.checker import (
    Accepted,
    Anomaly,
    AnomalyKind,
    BilledPeriod,
    Observed,
    PreviewAnswered,
    PriceSpan,
    check,
)
from tests.support.events import STREAM
from tests.support.invoices import invoices_of
from tests.support.ledger import billed_periods, executed, executed_effects
from tests.support.stack import patience

QUIESCENCE_TIMEOUT = 180.0


def _get(system: System, path: str, **params: Any) -> Any:
    with system.stack.http() as http:
        answered = http.get(path, params=params)
    answered.raise_for_status()
    return answered.json()


def busy(system: System) -> str | None:
    """What is still in flight (``None``: nothing): a command queued, running, retrying or
    waiting (the API's list), a message on a queue, a delivery of Stripe's on its way, or a
    pending change past its subscription's period end."""
    try:
        in_flight = _get(system, "/v1beta1/operations/commands", limit=10)["items"]
        if in_flight:
            return f"command {in_flight[0]['id']} {in_flight[0]['status']}"
        client = redis.Redis.from_url(system.stack.redis_url)
        try:
            queued = [queue for queue in CONSUMED_QUEUES if client.llen(queue)]
        finally:
            client.close()
        if queued:
            return f"messages on {', '.join(queued)}"
        with system.stack.stripe as emulator:
            now = emulator.now()
            deliveries = emulator.webhook_status()
        if not deliveries.idle:  # Stripe's news still on its way to us
            return f"Stripe's deliveries {deliveries}"
        for item in _get(system, "/v1beta1/operations/subscriptions", limit=100)["items"]:
            due = datetime.fromisoformat(item["current_period_end"]).timestamp() <= now
            if item["pending_change"] and due:
                return f"change {item['pending_change']} of {item['id']} past its period's end"
    except Exception as error:  # a process still coming back: not quiet yet
        return f"{type(error).__name__}: {error}"
    return None


def wait_for_quiescence(
    system: System, timeout: float = QUIESCENCE_TIMEOUT, why: list[str] | None = None
) -> float | None:
    """Seconds until the system was quiet twice a second apart (``None``: never, and ``why``
    gets what was in flight last)."""
    started = time.monotonic()
    last = None
    while time.monotonic() - started < timeout:
        last = busy(system)
        if last is None:
            time.sleep(1.0)
            last = busy(system)
            if last is None:
                return time.monotonic() - started
        time.sleep(0.5)
    if why is not None and last is not None:
        why.append(last)
    return None


EFFECTFUL = {"account_online"}


LISTED = ("queued", "running", "retrying", "waiting", "succeeded", "failed")


def listed_statuses(system: System) -> dict[str, str]:
    """Every command's status, as the operations API lists them (a command published on the
    queue belongs to no client: ``GET /v1beta1/commands/{id}`` shows it to none)."""
    statuses: dict[str, str] = {}
    after = None
    while True:
        params: dict[str, Any] = {"status": list(LISTED), "limit": 100}
        if after:
            params["after"] = after
        page = _get(system, "/v1beta1/operations/commands", **params)
        statuses.update({item["id"]: item["status"] for item in page["items"]})
        after = page["next_cursor"]
        if not after:
            return statuses


def _view(system: System, command_id: str) -> dict[str, Any]:
    """The command as the API shows its client (``status`` ``unknown (...)``: it does not)."""
    try:
        with system.stack.http() as http:
            answered = http.get(f"/v1beta1/commands/{command_id}")
    except Exception as error:
        return {"status": f"unknown ({type(error).__name__})"}
    if answered.status_code != 200:
        return {"status": f"unknown (HTTP {answered.status_code})"}
    view: dict[str, Any] = answered.json()
    return view


def observe(system: System, history: History, events: EventReader) -> Observed:
    observed = Observed()
    accepted = [sent for sent in history.sent if sent.command_id is not None]
    listed = listed_statuses(system)
    views: dict[str, dict[str, Any]] = {}
    for sent in accepted:
        assert sent.command_id is not None
        if sent.action == "enable_user_queue":  # no client's: the operations' list has it
            status = listed.get(sent.command_id, "unknown (not listed)")
        else:
            views[sent.command_id] = _view(system, sent.command_id)
            status = views[sent.command_id]["status"]
        observed.statuses[sent.command_id] = status
        effects: tuple[tuple[str, str], ...] = ()
        if sent.action in EFFECTFUL and status == "succeeded":
            effects = (("customer", sent.subject),)
        observed.accepted.append(Accepted(sent.command_id, effects))
    with EmulatorAdmin(system.stack.stripe_url) as emulator:
        observed.executed = executed_effects(emulator)
    sdk = sdk_client(system.stack.stripe_url)
    price_to_plan = system.price_to_plan()
    for item in _get(system, "/v1beta1/operations/subscriptions", limit=100)["items"]:
        theirs = sdk.v1.subscriptions.retrieve(item["provider_id"])
        price = str(theirs["items"].data[0].price.id)
        ours = {"plan": item["plan_id"]}
        stripes = {"plan": price_to_plan.get(price, price)}
        if system.hears_from_stripe:  # else a state Stripe moved on its own is not ours yet
            ours["state"] = item["state"]
            stripes["state"] = SubscriptionState.from_provider(str(theirs.status)).value
        observed.our_rows[f"subscription {item['id']}"] = ours
        observed.stripe_objects[f"subscription {item['id']}"] = stripes
    for sub in system.subscriptions:
        spans, periods = _money(system, sdk, history, views, sub.id, sub.provider_id)
        observed.prices[sub.provider_id] = spans
        observed.periods += periods
    observed.events_expected = expected_events(history, observed.statuses)
    observed.events_delivered = events.stop(until_seen=observed.events_expected)
    for preview in history.previews:
        observed.previews.append(_preview_answered(system, sdk, preview.subscription, preview))
    return observed


def _money(
    system: System,
    sdk: stripe.StripeClient,
    history: History,
    views: dict[str, dict[str, Any]],
    subscription_id: str,
    provider_id: str,
) -> tuple[list[PriceSpan], list[BilledPeriod]]:
    """The prices in force on a subscription, from the workload's answers (its starter plan
    from Stripe's start, then each immediate change from the ``effective_at`` it was
    answered, and each dashboard change from the time it was prorated at), and the periods
    Stripe billed that they judge: those that ended before any
    change at the period's end (or a cancel of one) was asked for, whose boundary prices the
    history alone cannot order."""
    sent = [s for s in history.sent if s.subject == subscription_id]
    staged = [s.emulator_at for s in sent if s.action in STAGING and s.emulator_at is not None]
    started = sdk.v1.subscriptions.retrieve(provider_id).start_date
    spans = [PriceSpan(datetime.fromtimestamp(started, UTC), PLAN_AMOUNTS["starter"])]
    for change in sent:
        if change.action == "dashboard_price_change" and change.emulator_at is not None:
            assert change.plan is not None
            spans.append(
                PriceSpan(
                    datetime.fromtimestamp(change.emulator_at, UTC), PLAN_AMOUNTS[change.plan]
                )
            )
            continue
        if change.action not in CHANGES or change.command_id is None or change.plan is None:
            continue
        view = views.get(change.command_id, {})
        if view.get("status") != "succeeded":
            continue
        result = change.body if change.status == 200 else view.get("result")
        if not isinstance(result, dict) or "phase" not in result:
            continue
        effective_at = datetime.fromisoformat(result["phase"]["effective_at"])
        spans.append(PriceSpan(effective_at.replace(microsecond=0), PLAN_AMOUNTS[change.plan]))
    spans.sort(key=lambda span: span.since)
    periods = [
        period
        for period in billed_periods(sdk, provider_id)
        if not staged or period.end.timestamp() <= min(staged)
    ]
    return spans, periods


EVENT_OF = {
    "account_online": "billing_account.created",
    "account_offline": "billing_account.created",
    "change_now": "subscription.plan_changed",
    "preview_then_change": "subscription.plan_changed",
}


def expected_events(history: History, statuses: dict[str, str]) -> set[str]:
    """The events the history says were due: one per account made and per immediate change
    made (by the command's id), one ``user.enabled`` per user some enable command enabled."""
    expected = set()
    for sent in history.sent:
        if sent.command_id is None or statuses.get(sent.command_id) != "succeeded":
            continue
        if sent.action in EVENT_OF and (sent.action not in CHANGES or sent.status == 200):
            expected.add(f"{EVENT_OF[sent.action]} {sent.command_id}")
        elif sent.action.startswith("enable_user") and sent.subject in history.disabled_users:
            expected.add(f"user.enabled {sent.subject}")
    return expected


EVENT_GRACE = 20.0
"""How long the checker waits for the events it expects after quiescence, on a quiet machine
(longer on a busy one, as :func:`tests.support.stack.patience` says): the relay's lock left
by a relay killed while it ran (10 s, ``adapters/outbound/stream.py``), then two of beat's
relays (``BILLING_EVENTS_RELAY_INTERVAL_SECONDS``, 5 s), which take over what a worker's
relay left (Redis restarting under it). An event later than that is judged never
delivered."""


class EventReader:
    """A consumer of the event stream for the schedule's length: reads it whole every half
    second and keeps every event seen (a Redis restarted empty loses what was read before,
    as a consumer would have read it)."""

    def __init__(self, system: System) -> None:
        self.system = system
        self.seen: set[tuple[str, str]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="event-reader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.read()

    def read(self) -> None:
        try:
            self.seen.update(delivered_events(self.system))
        except Exception:  # Redis coming back: read it next time
            return

    def stop(self, until_seen: AbstractSet[str] = frozenset()) -> list[tuple[str, str]]:
        """Everything read, once the ``until_seen`` keys were (or :data:`EVENT_GRACE`
        seconds passed): a relay that met a fault leaves its events to beat's next one."""
        deadline = time.monotonic() + EVENT_GRACE * patience()
        while time.monotonic() < deadline:
            self.read()
            if until_seen <= {key for _event_id, key in self.seen}:
                break
            time.sleep(0.5)
        self._stop.set()
        self._thread.join()
        self.read()
        return sorted(self.seen)


def delivered_events(system: System) -> list[tuple[str, str]]:
    """Every event on the stream: (its id, its key: the type and the command, or for a
    user's, the user)."""
    client = redis.Redis.from_url(system.stack.redis_url)
    try:
        entries = cast(list[tuple[bytes, dict[bytes, bytes]]], client.xrange(STREAM, "-", "+"))
    finally:
        client.close()
    delivered = []
    for _entry_id, fields in entries:
        event = json.loads(fields[b"event"])
        kind = event["type"]
        if kind == "user.enabled":
            delivered.append((event["id"], f"{kind} {event['subject']['id']}"))
        elif kind in set(EVENT_OF.values()):
            delivered.append((event["id"], f"{kind} {event.get('command_id')}"))
    return delivered


CHANGES = {"change_now", "preview_then_change"}


def _preview_answered(
    system: System, sdk: stripe.StripeClient, subscription: int, preview: Any
) -> PreviewAnswered:
    """The preview beside the invoice its change made at its ``proration_date`` (none when
    the change did not succeed, or the preview's lines wait for the next invoice)."""
    answer = preview.answer
    change = preview.change
    proration_date = datetime.fromisoformat(answer["proration_date"]).astimezone(UTC)
    invoiced = None
    succeeded = change is not None and change.status == 200
    if succeeded and answer["billed"] == "now":
        provider_id = system.subscriptions[subscription].provider_id
        for invoice in invoices_of(sdk, provider_id):
            if invoice.lines and all(
                line.proration and line.start == proration_date.replace(microsecond=0)
                for line in invoice.lines
            ):
                invoiced = invoice.total
    return PreviewAnswered(
        f"preview of {answer['plan_id']} at {answer['proration_date']}",
        int(answer["total"]),
        invoiced,
    )


def changes_lost(system: System, history: History) -> list[Anomaly]:
    """Each immediate change answered as done has a write at Stripe, made after it was sent,
    that put its plan's price on the subscription."""
    found = []
    with EmulatorAdmin(system.stack.stripe_url) as emulator:
        writes = [
            request
            for request in emulator.requests(path_prefix="/v1/subscriptions/", method="POST")
            if executed(request)
        ]
    for sent in history.sent:
        if sent.action not in {"change_now", "preview_then_change"} or sent.status != 200:
            continue
        assert sent.plan is not None
        price = system.plans[sent.plan].provider_price_id
        sub = next(s for s in system.subscriptions if s.id == sent.subject)
        made = [
            request
            for request in writes
            if request.path == f"/v1/subscriptions/{sub.provider_id}"
            and request.wall_time >= sent.at - 1
            and _price_written(request.form) == price
        ]
        if not made:
            found.append(
                Anomaly(
                    AnomalyKind.LOST,
                    str(sent.command_id),
                    f"{sent.action} of {sent.subject} to {sent.plan} answered 200, no write of"
                    " its price at Stripe",
                )
            )
    return found


def _price_written(form: dict[str, Any]) -> str | None:
    items = form.get("items") or {}
    first = items.get("0") if isinstance(items, dict) else None
    return first.get("price") if isinstance(first, dict) else None


def judge(
    system: System, history: History, events: EventReader | None = None
) -> tuple[list[Anomaly], Observed]:
    """Every anomaly, and what they were judged from (the events: what ``events`` read
    meanwhile, or the stream as it is now)."""
    observed = observe(system, history, events or EventReader(system))
    found = [_with_what_the_outbox_says(system, anomaly) for anomaly in check(observed)]
    return [*found, *changes_lost(system, history)], observed


def _with_what_the_outbox_says(system: System, anomaly: Anomaly) -> Anomaly:
    """An event never delivered, with our outbox's row for it: whether the relay never
    published it (held up: the relay's lock, a fault), or published it and the stream lost
    it, or no row was written at all. The verdict is the stream's; this only says where to
    look."""
    if anomaly.kind is not AnomalyKind.EVENT_NEVER:
        return anomaly
    event_type, _, of = anomaly.subject.partition(" ")
    condition = (
        EventRow.subject_key == f"user:{of}"
        if event_type == "user.enabled"
        else EventRow.command_id == of
    )
    with system.stack.sessions() as session:
        rows = session.scalars(select(EventRow).where(EventRow.type == event_type, condition)).all()
    if not rows:
        said = "no outbox row"
    else:
        said = "; ".join(
            f"outbox row {row.sequence} of {row.occurred_at:%H:%M:%S.%f}: "
            + (
                f"published at {row.published_at:%H:%M:%S.%f}"
                if row.published_at
                else "unpublished"
            )
            for row in rows
        )
    return Anomaly(anomaly.kind, anomaly.subject, f"{anomaly.detail} ({said})")
