"""The workload: users and other services acting on the system, as the schedule says, and the
history of what they were answered. A user whose request got no answer (a connection reset,
a 5xx naming no command) sends it again with the same ``Idempotency-Key``, as a careful
client does, until it is answered: a request with no answer may have been accepted, and only
its answer tells the history whether a change is in force."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import stripe  # noqa: TID251 - the workload plays Stripe's dashboard through the SDK
from celery import Celery

from stripe_emulator import EmulatorAdmin
from tests.emulator.support import sdk_client
from tests.schedules.plan import Step
from tests.schedules.system import System
from tests.support.stack import patience

ANSWER_DEADLINE = 60.0
"""How long a user asks again for an answer, on a quiet machine (longer on a busy one, as
:func:`tests.support.stack.patience` says): longer than any fault a schedule draws keeps the
API from answering (a killed API booting again, a partition, Redis back empty). A request
still unanswered after it is the workload's error, never a guess: a change the API accepted
whose answer was lost is in force at Stripe, and a history without it misjudges its bill."""
DASHBOARD_ATTEMPTS = 8
T = TypeVar("T")
STAGING = {"change_at_period_end", "cancel_staged"}
ACCOUNT = {"name": "Chaos Ltd", "email": "billing@chaos.example"}


class Unanswered(Exception):
    """A request the API never answered within :data:`ANSWER_DEADLINE`: whether it was
    accepted is unknown, so the schedule fails rather than judge a history that may lack it."""


@dataclass(frozen=True)
class Sent:
    """One command the workload sent and the answer it kept (the last, after its retries):
    ``command_id`` is the answer's ``Command-Id`` (``None``: never accepted)."""

    action: str
    subject: str
    at: float
    """Wall-clock time it was first sent (``time.time()``)."""
    status: int | None
    command_id: str | None
    body: Any = None
    plan: str | None = None
    """The plan a change asked for (its key in ``PLANS``)."""
    emulator_at: int | None = None
    """Stripe's clock when a staged change (or its cancel) was sent, or the time a dashboard
    change was prorated at."""


@dataclass(frozen=True)
class Previewed:
    subscription: int
    answer: dict[str, Any]
    change: Sent | None


@dataclass
class History:
    sent: list[Sent] = field(default_factory=list)
    previews: list[Previewed] = field(default_factory=list)
    disabled_users: set[str] = field(default_factory=set)
    """The users disabled when the schedule started: the ones an enable command enables."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, sent: Sent) -> Sent:
        with self._lock:
            self.sent.append(sent)
        return sent


class Workload:
    def __init__(self, system: System, history: History) -> None:
        self.system = system
        self.history = history
        self.publisher = Celery("another-service", broker=system.stack.redis_url)
        self.publisher.conf.update(
            task_serializer="json",
            accept_content=["json"],
            # A publish cut by a partition fails within seconds, as another service's would.
            broker_transport_options={"socket_timeout": 5, "socket_connect_timeout": 5},
        )

    def close(self) -> None:
        self.publisher.close()

    def act(self, step: Step) -> None:
        getattr(self, step.kind)(**step.args)

    # --- the actions ---------------------------------------------------------------------

    def account_online(self, org: int, mode: str) -> None:
        self._account(org, mode, offline=False)

    def account_offline(self, org: int, mode: str) -> None:
        self._account(org, mode, offline=True)

    def _account(self, org: int, mode: str, *, offline: bool) -> None:
        org_id = self.system.organizations[org]
        action = "account_offline" if offline else "account_online"
        self._command(
            action,
            org_id,
            f"/v1beta1/organizations/{org_id}/billing",
            {"body": ACCOUNT, "offline": offline},
            mode,
        )

    def enable_user(self, user: int, mode: str) -> None:
        user_id = self.system.users[user]
        if mode == "queue":
            self._publish(user_id)
        else:
            self._command("enable_user", user_id, f"/v1beta1/users/{user_id}/enable", {}, mode)

    def change_now(self, subscription: int, plan: str, mode: str) -> None:
        body = {"plan_change": {"plan": self.system.plans[plan].name, "immediate": True}}
        self._change("change_now", subscription, body, mode, plan)

    def change_at_period_end(self, subscription: int, plan: str, mode: str) -> None:
        body = {"plan_change": {"plan": self.system.plans[plan].name}}
        self._change("change_at_period_end", subscription, body, mode, plan)

    def cancel_staged(self, subscription: int) -> None:
        body = {"phase_change": {"cancel_upcoming_changes": True}}
        self._change("cancel_staged", subscription, body, "sync", None)

    def preview_then_change(self, subscription: int, plan: str) -> None:
        sub = self.system.subscriptions[subscription]
        name = self.system.plans[plan].name
        answered = self._send(f"{sub.change_url}/preview", {"plan": name}, "sync")
        if answered.status_code != 200:
            return
        answer = answered.json()
        body = {
            "plan_change": {
                "plan": name,
                "immediate": True,
                "proration_date": answer["proration_date"],
            }
        }
        change = self._change("preview_then_change", subscription, body, "sync", plan)
        with self.history._lock:
            self.history.previews.append(Previewed(subscription, answer, change))

    def dashboard_price_change(self, subscription: int, plan: str) -> None:
        """Someone at Stripe's dashboard moves the subscription to ``plan``'s price,
        prorated as of Stripe's now (the dashboard's default): not through us, so we learn of
        it only from the webhooks. Sent again under its idempotency key while Stripe's faults
        answer it badly, as the dashboard's own retries would."""
        sub = self.system.subscriptions[subscription]
        price = str(self.system.plans[plan].provider_price_id)
        sdk = sdk_client(self.system.stack.stripe_url)
        at = time.time()
        with EmulatorAdmin(self.system.stack.stripe_url) as emulator:
            now = emulator.now()
        item = _stubbornly(lambda: sdk.v1.subscriptions.retrieve(sub.provider_id))
        if item is None or item["items"].data[0].price.id == price:
            why = "unread" if item is None else "already on that price"
            self.history.add(Sent("dashboard_price_change", sub.id, at, None, None, why, plan))
            return
        params: dict[str, Any] = {
            "items": [{"id": item["items"].data[0].id, "price": price}],
            "proration_behavior": "create_prorations",
            "proration_date": now,
        }
        key = f"dashboard-{uuid.uuid4()}"
        updated = _stubbornly(
            lambda: sdk.v1.subscriptions.update(
                sub.provider_id,
                params=params,  # type: ignore[arg-type]
                options={"idempotency_key": key},
            )
        )
        made = updated is not None
        self.history.add(
            Sent(
                "dashboard_price_change",
                sub.id,
                at,
                200 if made else None,
                None,
                None if made else "Stripe's faults outlasted its retries",
                plan,
                now if made else None,
            )
        )

    def dashboard_cancel(self, subscription: int) -> None:
        """Someone at Stripe's dashboard cancels the subscription at its period's end: it
        ends there, and what we had pending for it is skipped."""
        sub = self.system.subscriptions[subscription]
        sdk = sdk_client(self.system.stack.stripe_url)
        key = f"dashboard-{uuid.uuid4()}"
        at = time.time()
        canceled = _stubbornly(
            lambda: sdk.v1.subscriptions.update(
                sub.provider_id,
                params={"cancel_at_period_end": True},
                options={"idempotency_key": key},
            )
        )
        made = canceled is not None
        why = None if made else "Stripe's faults outlasted its retries"
        self.history.add(Sent("dashboard_cancel", sub.id, at, 200 if made else None, None, why))

    # --- sending ---------------------------------------------------------------------------

    def _change(
        self, action: str, subscription: int, body: dict[str, Any], mode: str, plan: str | None
    ) -> Sent:
        sub = self.system.subscriptions[subscription]
        return self._command(action, sub.id, sub.change_url, body, mode, plan)

    def _command(
        self,
        action: str,
        subject: str,
        path: str,
        body: dict[str, Any],
        mode: str,
        plan: str | None = None,
    ) -> Sent:
        at = time.time()
        emulator_at = None
        if action in STAGING:
            with EmulatorAdmin(self.system.stack.stripe_url) as emulator:
                emulator_at = emulator.now()
        answered = self._send(path, body, mode)
        return self.history.add(
            Sent(
                action,
                subject,
                at,
                answered.status_code,
                answered.headers.get("Command-Id"),
                _json(answered),
                plan,
                emulator_at,
            )
        )

    def _send(self, path: str, body: dict[str, Any], mode: str) -> httpx.Response:
        headers = {"Idempotency-Key": str(uuid.uuid4())}
        if mode == "async":
            headers["Prefer"] = "respond-async"
        deadline = time.monotonic() + ANSWER_DEADLINE * patience()
        while True:
            answered: httpx.Response | None = None
            try:
                with self.system.stack.http() as http:
                    answered = http.post(path, json=body, headers=headers)
            except httpx.HTTPError:
                pass
            if answered is not None and (
                answered.status_code < 500 or "Command-Id" in answered.headers
            ):
                # An answer that names its command says what became of it: a 5xx naming one
                # is the command's own end (``failed``, its retries spent), the same at every
                # asking.
                return answered
            if time.monotonic() > deadline:
                last = "no answer" if answered is None else f"HTTP {answered.status_code}"
                raise Unanswered(f"POST {path}: {last} for {ANSWER_DEADLINE:.0f} s and more")
            time.sleep(1.0)

    def publish_again_what_the_log_does_not_know(self, known: Callable[[], set[str]]) -> int:
        """The other service's recipe after a failover (docs/how-to/publish-commands.md):
        each command it published that the log does not know (``known``: the command ids the
        log lists) may have been lost with Redis's dataset, and is published again under its
        id (run once whatever became of the first). Returns how many."""
        logged = known()
        missing = [
            sent
            for sent in self.history.sent
            if sent.action == "enable_user_queue"
            and sent.command_id is not None
            and sent.command_id not in logged
        ]
        for sent in missing:
            self.publisher.send_task(
                "users.enable",
                kwargs={"command_id": sent.command_id, "user_id": sent.subject},
                queue="users",
            )
        return len(missing)

    def _publish(self, user_id: str) -> None:
        command_id = str(uuid.uuid4())
        at = time.time()
        try:
            self.publisher.send_task(
                "users.enable",
                kwargs={"command_id": command_id, "user_id": user_id},
                queue="users",
                retry=False,
            )
        except Exception:  # Redis down: the other service knows its publish failed
            self.history.add(Sent("enable_user_queue", user_id, at, None, None))
            return
        self.history.add(Sent("enable_user_queue", user_id, at, 0, command_id))


def _stubbornly(call: Callable[[], T]) -> T | None:
    """``call``'s answer, asked again (a second apart) while Stripe's faults answer badly;
    ``None`` if they still do after :data:`DASHBOARD_ATTEMPTS` tries."""
    for _ in range(DASHBOARD_ATTEMPTS):
        try:
            return call()
        except stripe.StripeError:
            time.sleep(1.0)
    return None


def _json(answered: httpx.Response) -> Any:
    try:
        return answered.json()
    except ValueError:
        return answered.text
