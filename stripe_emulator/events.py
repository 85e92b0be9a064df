"""Events: the ``evt_...`` objects Stripe records for every change, kept in an :class:`EventLog`.

An event has exactly the keys of Stripe's ``event`` fixture: ``id``, ``object``, then
``api_version`` (the emulator's one version), ``created`` (emulator time of the change),
``data`` (``object``: the object as it was rendered at that moment; ``previous_attributes``
on ``*.updated`` events only), ``livemode``, ``pending_webhooks`` (endpoints still to be
answered with a 2xx, see :mod:`stripe_emulator.webhooks`), ``request`` (``id`` and
``idempotency_key`` of the API request that caused it; both ``null`` for time-driven
changes: renewals, retries, expiries) and ``type``.

``data.object`` is a snapshot: a copy of the stored record taken when the event is recorded
(shallow, plus copies of the few nested values the emulator changes in place; see
:mod:`stripe_emulator.recorder`), so a later change never shows in an earlier event.

``previous_attributes`` follows Stripe's rule (:func:`diff`): the top-level fields that changed,
with their old values; a hash is compared key by key and only its changed keys are given
(``{"metadata": {"plan": "basic"}}``; a key that did not exist before is ``null``), an array or
any other value is given whole (the renewal's ``{"items": {"data": [...]}}`` holds the whole
old items array, with the old ``current_period_start``/``current_period_end``).

Changes are recorded within *operations* (:meth:`EventLog.begin`/:meth:`EventLog.end`): one API
request's execution, one timeline entry (a renewal, a retry), one admin payment call. An object
*watched* during an operation (:meth:`EventLog.watch`) is snapshotted first; at the end of the
operation it is compared with its new state and its ``.created``, ``.updated`` or ``.deleted``
event takes the place reserved for it when it was first watched, so a renewal's
``customer.subscription.updated`` comes before the ``invoice.created`` it causes. Nothing
changed, nothing recorded: an idempotent replay, or a request refused (validation, a missing
object, a 402 with ``error_if_incomplete``) records no event. The one failed request that does
record is a declined ``POST /v1/invoices/{id}/pay``: as on Stripe, the attempt happened
(``invoice.payment_failed``).

The log keeps the newest ``cap`` events (100,000 by default, oldest dropped first) and forgets
them on reset; they are kept in the state file. Unlike Stripe (which lists 30 days of events)
the emulator does not drop events by age.
"""

from __future__ import annotations

import time
import typing
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal

from stripe.params import WebhookEndpointCreateParams

from stripe_emulator.config import API_VERSION
from stripe_emulator.ids import new_id

Record = dict[str, Any]
DEFAULT_CAP: Final = 100_000
_MISSING: Final = object()


def _literals(annotation: Any) -> list[str]:
    found: list[str] = []
    for arg in typing.get_args(annotation):
        if typing.get_origin(arg) is Literal:
            found.extend(typing.get_args(arg))
        else:
            found.extend(_literals(arg))
    return found


def _sdk_event_types() -> tuple[str, ...]:
    """Stripe's event types (and ``*``), from the SDK's ``enabled_events`` parameter type."""
    return tuple(_literals(WebhookEndpointCreateParams.__annotations__["enabled_events"]))


EVENT_TYPES: Final[tuple[str, ...]] = _sdk_event_types()
API_VERSIONS: Final[tuple[str, ...]] = tuple(
    _literals(WebhookEndpointCreateParams.__annotations__["api_version"])
)


class Event:
    """One event. ``object`` is ``None`` while its place is reserved (see the module docstring)."""

    __slots__ = (
        "created",
        "failed_deliveries",
        "id",
        "idempotency_key",
        "object",
        "pending",
        "previous",
        "request_id",
        "type",
    )

    def __init__(
        self,
        type_: str,
        created: int,
        request: tuple[str | None, str | None],
        event_id: str | None = None,
    ) -> None:
        self.id = event_id or new_id("evt")
        self.type = type_
        self.created = created
        self.request_id, self.idempotency_key = request
        self.object: Record | None = None
        self.previous: Record | None = None
        self.pending = 0
        self.failed_deliveries = 0
        """Delivery attempts that failed (a renewal's draft waits while its ``invoice.created``
        is failing: :func:`stripe_emulator.payments.invoice_due`)."""

    @property
    def live(self) -> bool:
        return self.object is not None


def render(event: Event) -> Record:
    """The event as the API answers it (and as a webhook delivers it)."""
    data: Record = {"object": event.object}
    if event.previous is not None:
        data["previous_attributes"] = event.previous
    return {
        "id": event.id,
        "object": "event",
        "api_version": API_VERSION,
        "created": event.created,
        "data": data,
        "livemode": False,
        "pending_webhooks": event.pending,
        "request": {"id": event.request_id, "idempotency_key": event.idempotency_key},
        "type": event.type,
    }


def diff(before: Record, after: Record) -> Record:
    """Stripe's ``previous_attributes``: changed top-level fields with their old values."""
    get = before.get
    # Snapshots share every value that did not change: an identity test sorts out most keys.
    suspects = [key for key, new in after.items() if new is not get(key, _MISSING)]
    previous: Record = {}
    for key in suspects:
        old = get(key, _MISSING)
        if old is _MISSING:
            previous[key] = None
        elif old != after[key]:
            previous[key] = _old_value(old, after[key])
    return previous


def _old_value(old: Any, new: Any) -> Any:
    if not isinstance(old, dict) or not isinstance(new, dict):
        return old
    changed = {key: value for key, value in old.items() if key not in new or new[key] != value}
    for key in new.keys() - old.keys():
        changed[key] = None
    return changed


@dataclass(slots=True)
class _Watch:
    prefix: str
    before: Record | None  # None: created during the operation
    snapshot: Callable[[], Record | None]
    slot: Event
    ended: Callable[[Record], bool] | None
    quiet: frozenset[str]


class EventLog:
    """Recorded events in creation order, bounded to ``cap``.

    ``endpoints`` is the store's webhook endpoints (each event's ``pending_webhooks`` is the
    number of enabled endpoints whose ``enabled_events`` match its type); ``listener`` is
    called whenever an event waits for delivery (the webhook dispatcher); ``clock`` gives the
    time of an event recorded outside an operation.
    """

    def __init__(self, endpoints: dict[str, Record], cap: int = DEFAULT_CAP) -> None:
        self.endpoints = endpoints
        self.cap = cap
        self._order: deque[Event] = deque()
        self._by_id: dict[str, Event] = {}
        self._routes: dict[str, tuple[str, ...]] = {}
        self.fresh: list[tuple[Event, tuple[str, ...]]] = []  # events waiting for delivery
        self._reserved: list[Event] = []
        self.listener: Callable[[], None] | None = None
        self.clock: Callable[[], int] = lambda: int(time.time())
        self._depth = 0
        self._now = 0
        self._request: tuple[str | None, str | None] = (None, None)
        self._watched: dict[str, _Watch] = {}

    # Operations -------------------------------------------------------------------------------

    def begin(
        self, now: int, request_id: str | None = None, idempotency_key: str | None = None
    ) -> None:
        """Start an operation at emulator time ``now`` (nested calls join the outer one)."""
        self._depth += 1
        if self._depth == 1:
            self._now = now
            self._request = (request_id, idempotency_key)

    def end(self) -> None:
        """End the operation: watched objects that changed get their event."""
        self._depth -= 1
        if self._depth > 0:
            return
        watched, self._watched = self._watched, {}
        for watch in watched.values():
            self._settle(watch)
        reserved, self._reserved = self._reserved, []
        for event in reserved:  # in creation order, whatever the order they were settled in
            if event.live:
                self._route(event)
        self._request = (None, None)

    def _settle(self, watch: _Watch) -> None:
        after = watch.snapshot()
        slot = watch.slot
        if after is None:
            return  # gone: its place stays empty
        if watch.before is None:
            slot.type = watch.prefix + ".created"
        elif watch.ended is not None and watch.ended(after) and not watch.ended(watch.before):
            slot.type = watch.prefix + ".deleted"
        else:
            previous = diff(watch.before, after)
            if previous.keys() <= watch.quiet:
                return  # nothing (worth an event) changed
            slot.type = watch.prefix + ".updated"
            slot.previous = previous
        slot.object = after

    def watch(
        self,
        key: str,
        prefix: str,
        snapshot: Callable[[], Record | None],
        *,
        created: bool = False,
        ended: Callable[[Record], bool] | None = None,
        quiet: frozenset[str] = frozenset(),
    ) -> None:
        """Follow an object through the current operation (see the module docstring).

        ``prefix`` names its events (``customer.subscription``); ``created`` says the operation
        created it; ``ended`` tells from a snapshot whether it is gone (its change is then a
        ``.deleted`` event); a change of ``quiet`` fields alone records nothing.
        """
        if self._depth == 0 or key in self._watched:
            return
        before = None if created else snapshot()
        if before is None and not created:
            return
        slot = self._reserve(prefix + ".updated")
        self._watched[key] = _Watch(prefix, before, snapshot, slot, ended, quiet)

    def record(self, type_: str, obj: Record, previous: Record | None = None) -> Event:
        """Record an event now (``obj`` must be a snapshot that nothing will change)."""
        if self._depth == 0:
            event = self._add(Event(type_, self.clock(), (None, None)))
            event.object, event.previous = obj, previous
            self._route(event)
            return event
        event = self._reserve(type_)
        event.object, event.previous = obj, previous
        return event

    def _reserve(self, type_: str) -> Event:
        event = self._add(Event(type_, self._now, self._request))
        self._reserved.append(event)
        return event

    def _add(self, event: Event) -> Event:
        self._order.append(event)
        self._by_id[event.id] = event
        while len(self._order) > self.cap:
            oldest = self._order.popleft()
            self._by_id.pop(oldest.id, None)
        return event

    # Delivery routing ---------------------------------------------------------------------------

    def endpoints_changed(self) -> None:
        self._routes.clear()

    def routes(self, type_: str) -> tuple[str, ...]:
        """Ids of the enabled endpoints that want events of ``type_``."""
        found = self._routes.get(type_)
        if found is None:
            found = tuple(
                endpoint["id"]
                for endpoint in self.endpoints.values()
                if endpoint["status"] == "enabled"
                and ("*" in endpoint["enabled_events"] or type_ in endpoint["enabled_events"])
            )
            self._routes[type_] = found
        return found

    def _route(self, event: Event) -> None:
        if not self.endpoints:
            return
        targets = self.routes(event.type)
        if not targets:
            return
        event.pending = len(targets)
        self.fresh.append((event, targets))
        if self.listener is not None:
            self.listener()

    def take_fresh(self) -> list[tuple[Event, tuple[str, ...]]]:
        fresh, self.fresh = self.fresh, []
        return fresh

    # Reading ------------------------------------------------------------------------------------

    def get(self, event_id: str) -> Event | None:
        event = self._by_id.get(event_id)
        return event if event is not None and event.live else None

    def newest_first(self) -> Iterator[Event]:
        return (event for event in reversed(self._order) if event.live)

    def __len__(self) -> int:
        return sum(1 for event in self._order if event.live)

    # Persistence --------------------------------------------------------------------------------

    def to_json(self) -> list[Record]:
        return [render(event) for event in self._order if event.live]

    def load_json(self, events: list[Record]) -> None:
        for data in events:
            request = data["request"] or {}
            event = Event(
                data["type"],
                data["created"],
                (request.get("id"), request.get("idempotency_key")),
                data["id"],
            )
            event.object = data["data"]["object"]
            event.previous = data["data"].get("previous_attributes")
            event.pending = data["pending_webhooks"]
            self._add(event)
