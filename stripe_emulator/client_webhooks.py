"""The webhook part of :class:`stripe_emulator.client.EmulatorAdmin` (routes: ``admin.py``).

>>> admin.set_retry_schedule([0.2, 0.2])  # three attempts, 0.2 s apart
>>> admin.duplicate_deliveries(match="invoice.*")  # every invoice event sent twice
>>> admin.pause_deliveries(); ...; admin.resume_deliveries()
>>> admin.wait_for_deliveries(timeout=10)  # TimeoutError if still busy after 10 s
>>> [(a.type, a.attempt, a.status) for a in admin.deliveries(event="evt_...")]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class DeliveryAttempt:
    """One attempt to deliver an event to an endpoint (times are wall-clock Unix seconds).

    ``outcome`` is ``succeeded`` (a 2xx), ``failed``, ``dropped`` (a ``drop`` fault: never
    sent) or ``skipped`` (the endpoint was deleted or disabled); ``status`` is the HTTP status
    (``None`` without an answer, ``error`` then says why); ``fault`` names the delivery faults
    applied; ``next_retry_at`` is set when a retry was scheduled.
    """

    event: str
    type: str
    endpoint: str
    attempt: int
    duplicate: bool
    outcome: str
    status: int | None
    error: str | None
    fault: str | None
    signature_timestamp: int | None
    started_at: float
    finished_at: float
    next_retry_at: float | None


@dataclass(frozen=True, slots=True)
class WebhookFault:
    """A delivery fault rule (see ``stripe_emulator/webhook_faults.py``)."""

    id: str
    kind: str
    match: str
    endpoint: str | None
    probability: float
    count: int | None
    seconds: float
    window: int
    order: str
    hold_seconds: float
    fired: int


@dataclass(frozen=True, slots=True)
class RetrySchedule:
    """Waits (wall-clock seconds) before each retry; ``max_attempts`` is one more."""

    delays: tuple[float, ...]
    max_attempts: int
    timeout_seconds: float


@dataclass(frozen=True, slots=True)
class WebhookStatus:
    """Deliveries under way: ``idle`` when nothing is queued, in flight, scheduled (a retry or
    a delay), held by a reorder window or recorded and not yet queued."""

    paused: bool
    idle: bool
    queued: int
    in_flight: int
    scheduled: int
    holding: int
    recorded: int


def _status(answer: dict[str, Any]) -> WebhookStatus:
    return WebhookStatus(**{name: answer[name] for name in WebhookStatus.__slots__})


def _schedule(answer: dict[str, Any]) -> RetrySchedule:
    return RetrySchedule(
        tuple(answer["delays"]), int(answer["max_attempts"]), float(answer["timeout_seconds"])
    )


class WebhookAdmin:
    """Webhook methods; :class:`EmulatorAdmin` provides ``_call``."""

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        raise NotImplementedError

    def webhook_status(self) -> WebhookStatus:
        return _status(self._call("GET", "/webhooks"))

    def pause_deliveries(self) -> None:
        """Hold every webhook delivery (new events queue up) until :meth:`resume_deliveries`."""
        self._call("POST", "/webhooks/pause")

    def resume_deliveries(self) -> None:
        """Send what was held, in order, and carry on."""
        self._call("POST", "/webhooks/resume")

    def wait_for_deliveries(self, timeout: float = 10.0) -> WebhookStatus:
        """Wait until no delivery is queued, in flight, scheduled or held; raise TimeoutError
        if that takes longer than ``timeout`` seconds (as it does while paused with deliveries
        held). Dropped and given-up deliveries do not count."""
        answer = self._call("POST", "/webhooks/wait", {"timeout": timeout}, timeout=timeout + 10)
        status = _status(answer)
        if not status.idle:
            raise TimeoutError(f"webhook deliveries still under way after {timeout} s: {status}")
        return status

    def deliveries(
        self, event: str | None = None, endpoint: str | None = None
    ) -> list[DeliveryAttempt]:
        """Delivery attempts, oldest first, optionally of one event and/or endpoint."""
        params = {}
        if event is not None:
            params["event"] = event
        if endpoint is not None:
            params["endpoint"] = endpoint
        answer = self._call("GET", "/webhooks/deliveries", params=params)
        return [DeliveryAttempt(**attempt) for attempt in answer["deliveries"]]

    def clear_deliveries(self) -> None:
        self._call("DELETE", "/webhooks/deliveries")

    def retry_schedule(self) -> RetrySchedule:
        return _schedule(self._call("GET", "/webhooks/retry_schedule"))

    def set_retry_schedule(
        self, delays: Sequence[float] | None = None, *, timeout_seconds: float | None = None
    ) -> RetrySchedule:
        """Waits before each retry (``[]``: no retries) and/or each attempt's timeout."""
        body: dict[str, Any] = {}
        if delays is not None:
            body["delays"] = list(delays)
        if timeout_seconds is not None:
            body["timeout_seconds"] = timeout_seconds
        return _schedule(self._call("POST", "/webhooks/retry_schedule", body))

    def add_webhook_fault(self, kind: str, match: str = "*", **fields: Any) -> WebhookFault:
        """Add a delivery fault rule (``kind``: duplicate, reorder, delay or drop; ``fields``:
        endpoint, probability, count, seconds, window, order, hold_seconds)."""
        body = {"kind": kind, "match": match}
        body.update({name: value for name, value in fields.items() if value is not None})
        return WebhookFault(**self._call("POST", "/webhooks/faults", body))

    def duplicate_deliveries(
        self,
        match: str = "*",
        *,
        probability: float = 1.0,
        count: int | None = None,
        endpoint: str | None = None,
    ) -> WebhookFault:
        """Deliver matching events twice."""
        return self.add_webhook_fault(
            "duplicate", match, probability=probability, count=count, endpoint=endpoint
        )

    def reorder_deliveries(
        self,
        window: int = 2,
        *,
        order: str = "reverse",
        hold_seconds: float = 1.0,
        match: str = "*",
        probability: float = 1.0,
        count: int | None = None,
        endpoint: str | None = None,
    ) -> WebhookFault:
        """Hold an endpoint's next ``window`` deliveries (at most ``hold_seconds``) and send
        them reversed (or ``order="shuffle"``); ``count`` counts windows."""
        return self.add_webhook_fault(
            "reorder",
            match,
            window=window,
            order=order,
            hold_seconds=hold_seconds,
            probability=probability,
            count=count,
            endpoint=endpoint,
        )

    def delay_deliveries(
        self,
        seconds: float,
        match: str = "*",
        *,
        probability: float = 1.0,
        count: int | None = None,
        endpoint: str | None = None,
    ) -> WebhookFault:
        """Send matching attempts ``seconds`` later (others may overtake them)."""
        return self.add_webhook_fault(
            "delay", match, seconds=seconds, probability=probability, count=count,
            endpoint=endpoint,
        )  # fmt: skip

    def drop_deliveries(
        self,
        match: str = "*",
        *,
        probability: float = 1.0,
        count: int | None = None,
        endpoint: str | None = None,
    ) -> WebhookFault:
        """Never send matching attempts, and never retry them."""
        return self.add_webhook_fault(
            "drop", match, probability=probability, count=count, endpoint=endpoint
        )

    def webhook_faults(self) -> list[WebhookFault]:
        return [WebhookFault(**rule) for rule in self._call("GET", "/webhooks/faults")["faults"]]

    def remove_webhook_fault(self, fault_id: str) -> None:
        self._call("DELETE", f"/webhooks/faults/{fault_id}")

    def clear_webhook_faults(self) -> None:
        self._call("DELETE", "/webhooks/faults")

    def roll_webhook_secret(self, endpoint_id: str, expires_in: float = 0) -> str:
        """Give the endpoint a new signing secret (returned); the old one also signs for
        ``expires_in`` more seconds (wall clock)."""
        answer = self._call(
            "POST", f"/webhooks/endpoints/{endpoint_id}/roll_secret", {"expires_in": expires_in}
        )
        return str(answer["secret"])
