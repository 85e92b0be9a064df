"""Webhook delivery: every event POSTed, signed, to each enabled endpoint that wants it.

An event is delivered to every webhook endpoint whose ``status`` is ``enabled`` and whose
``enabled_events`` holds its type or ``*`` when the event is recorded (that count is its
``pending_webhooks``). A delivery is an HTTP ``POST`` to the endpoint's URL as it is when sent:

* body: the event exactly as ``GET /v1/events/{id}`` renders it at the first attempt (the same
  bytes on every retry);
* ``Content-Type: application/json; charset=utf-8``,
  ``User-Agent: Stripe/1.0 (+https://stripe.com/docs/webhooks)``;
* ``Stripe-Signature: t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed with the
  endpoint's secret>``, as Stripe signs (``stripe.Webhook.construct_event`` accepts it); after
  the secret is rolled (``POST /_emulator/webhooks/endpoints/{id}/roll_secret``) a second
  ``v1`` signs with the old secret until it expires, so receivers can switch secrets without
  losing a delivery.
  **``t`` is wall-clock time** (``time.time()``), never emulator time: receivers check it
  against their own clock with a 300 s tolerance, while the emulator clock may be days ahead.

A 2xx answer is a success and counts the event's ``pending_webhooks`` down; anything else (an
error status, a redirect, a refused connection, no answer within the timeout) is retried with
backoff. Stripe retries for up to 3 days; the emulator's schedule is a list of waits in
wall-clock seconds (default 0.5, 1, 2, 4, 8: six attempts in about 16 s), set with
``POST /_emulator/webhooks/retry_schedule``. After the last failed attempt the delivery is
given up and ``pending_webhooks`` keeps counting it.

Deliveries run in the background on the event loop (one ``httpx.AsyncClient``, one worker per
endpoint): an API request or a clock advance only records events, however many it makes.
Each endpoint gets its events in the order they were recorded, one at a time, unless faults
(:mod:`stripe_emulator.webhook_faults`), retries or a pause change it: like Stripe, the
emulator does not guarantee the order. Deliveries in flight when the emulator stops are not
resumed after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import httpx

from stripe_emulator.events import Event, render
from stripe_emulator.signatures import sign, signing_secrets
from stripe_emulator.webhook_faults import DeliveryFaults, Plan

if TYPE_CHECKING:
    from stripe_emulator.state import Store

logger = logging.getLogger("stripe_emulator")

USER_AGENT: Final = "Stripe/1.0 (+https://stripe.com/docs/webhooks)"
DEFAULT_DELAYS: Final = (0.5, 1.0, 2.0, 4.0, 8.0)
DEFAULT_TIMEOUT: Final = 5.0
ATTEMPT_LOG_SIZE: Final = 50_000
Record = dict[str, Any]


@dataclass(slots=True)
class RetrySchedule:
    """Waits (wall-clock seconds) before each retry; one attempt more than waits."""

    delays: tuple[float, ...] = DEFAULT_DELAYS
    timeout_seconds: float = DEFAULT_TIMEOUT

    @property
    def max_attempts(self) -> int:
        return len(self.delays) + 1

    def to_json(self) -> Record:
        return {
            "delays": list(self.delays),
            "max_attempts": self.max_attempts,
            "timeout_seconds": self.timeout_seconds,
        }


@dataclass(slots=True)
class Delivery:
    """One event on its way to one endpoint, across its attempts."""

    event: Event
    endpoint: str
    attempts: int = 0
    body: bytes | None = None
    plan: Plan | None = None  # faults decided for the coming attempt (kept across a delay)
    reordered: bool = False
    succeeded: bool = False


class Dispatcher:
    """Delivers the events of the current store (``store()``) in the background."""

    def __init__(self, store: Callable[[], Store]) -> None:
        self._store = store
        self.schedule = RetrySchedule()
        self.faults = DeliveryFaults()
        self.attempts: deque[Record] = deque(maxlen=ATTEMPT_LOG_SIZE)
        self.paused = False
        self._resumed = asyncio.Event()
        self._arrived = asyncio.Event()
        self._queues: dict[str, deque[Delivery]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._timers: set[asyncio.TimerHandle] = set()
        self._in_flight = 0
        self._holding = 0
        self._drain_scheduled = False
        self._client: httpx.AsyncClient | None = None

    # Intake ---------------------------------------------------------------------------------

    def wake(self) -> None:
        """Called by the event log when events wait for delivery."""
        if self._drain_scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a store used outside the server): delivered once there is one
        self._drain_scheduled = True
        loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._drain_scheduled = False
        for event, targets in self._store().events.take_fresh():
            for endpoint in targets:
                self._enqueue(Delivery(event, endpoint))

    def _enqueue(self, delivery: Delivery) -> None:
        endpoint = delivery.endpoint
        self._queues.setdefault(endpoint, deque()).append(delivery)
        self._arrived.set()
        worker = self._workers.get(endpoint)
        if worker is None or worker.done():
            self._workers[endpoint] = asyncio.get_running_loop().create_task(self._work(endpoint))

    def _later(self, seconds: float, delivery: Delivery) -> float:
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._timers.discard(handle)
            self._enqueue(delivery)

        handle = loop.call_later(seconds, fire)
        self._timers.add(handle)
        return time.time() + seconds

    # Workers --------------------------------------------------------------------------------

    async def _work(self, endpoint: str) -> None:
        queue = self._queues[endpoint]
        try:
            while queue:
                if self.paused:
                    await self._resumed.wait()
                    continue
                for delivery in await self._next(queue):
                    try:
                        await self._attempt(delivery)
                    except Exception as failure:  # a bug: log it, keep delivering the rest
                        logger.exception("webhook delivery of %s failed", delivery.event.id)
                        self._log(delivery, delivery.attempts, None, outcome="failed",
                                  error=f"emulator error: {failure!r}")  # fmt: skip
        finally:
            if self._workers.get(endpoint) is asyncio.current_task():
                del self._workers[endpoint]

    async def _next(self, queue: deque[Delivery]) -> list[Delivery]:
        first = queue.popleft()
        rule = self.faults.reorder_rule(first.event.type, first.endpoint)
        if rule is None:
            return [first]
        batch = [first]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + rule.hold_seconds
        self._holding += 1
        try:
            while len(batch) < rule.window:
                if queue:
                    batch.append(queue.popleft())
                    self._holding += 1
                    continue
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                self._arrived.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._arrived.wait(), remaining)
        finally:
            self._holding -= len(batch)
        for delivery in batch:
            delivery.reordered = True
        return self.faults.reorder(batch, rule)

    async def _attempt(self, delivery: Delivery) -> None:
        store = self._store()
        event = delivery.event
        endpoint = store.webhook_endpoints.get(delivery.endpoint)
        if endpoint is None or endpoint["status"] != "enabled":
            gone = f"endpoint {'deleted' if endpoint is None else 'disabled'}"
            self._log(delivery, delivery.attempts + 1, None, outcome="skipped", error=gone)
            return
        plan = delivery.plan or self.faults.plan(event.type, delivery.endpoint)
        if plan.drop:
            self._log(delivery, delivery.attempts + 1, None, outcome="dropped", fault="drop")
            return
        if plan.delay and delivery.plan is None:  # not yet waited for
            delivery.plan = plan
            self._later(plan.delay, delivery)
            return
        delivery.plan = None
        delivery.attempts += 1
        if delivery.body is None:
            delivery.body = json.dumps(render(event), separators=(",", ":")).encode()
        fault = plan.names
        if delivery.reordered:
            fault = "reorder" if fault is None else f"reorder+{fault}"
            delivery.reordered = False
        secrets = signing_secrets(store, delivery.endpoint)
        ok = await self._post(delivery, endpoint["url"], secrets, fault)
        if plan.duplicate:
            ok = await self._post(delivery, endpoint["url"], secrets, fault, duplicate=True) or ok
        if ok:
            if not delivery.succeeded:
                delivery.succeeded = True
                event.pending = max(0, event.pending - 1)
            return
        event.failed_deliveries += 1
        if delivery.attempts < self.schedule.max_attempts:
            retry_at = self._later(self.schedule.delays[delivery.attempts - 1], delivery)
            self.attempts[-1]["next_retry_at"] = retry_at

    async def _post(
        self,
        delivery: Delivery,
        url: str,
        secrets: list[str],
        fault: str | None,
        *,
        duplicate: bool = False,
    ) -> bool:
        assert delivery.body is not None
        if self._client is None:
            self._client = httpx.AsyncClient()
        timestamp = int(time.time())  # wall clock: see the module docstring
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "User-Agent": USER_AGENT,
            "Accept": "*/*; q=0.5, application/xml",
            "Cache-Control": "no-cache",
            "Stripe-Signature": sign(delivery.body, secrets, timestamp),
        }
        started = time.time()
        status: int | None = None
        error: str | None = None
        self._in_flight += 1
        try:
            response = await self._client.post(
                url, content=delivery.body, headers=headers, timeout=self.schedule.timeout_seconds
            )
            status = response.status_code
        except httpx.HTTPError as failure:
            error = f"{type(failure).__name__}: {failure}".rstrip(": ")
        finally:
            self._in_flight -= 1
        ok = status is not None and 200 <= status < 300
        self._log(
            delivery,
            delivery.attempts,
            status,
            outcome="succeeded" if ok else "failed",
            error=error,
            fault=fault,
            timestamp=timestamp,
            started=started,
            duplicate=duplicate,
        )
        return ok

    def _log(
        self,
        delivery: Delivery,
        attempt: int,
        status: int | None,
        *,
        outcome: str,
        error: str | None = None,
        fault: str | None = None,
        timestamp: int | None = None,
        started: float | None = None,
        duplicate: bool = False,
    ) -> None:
        finished = time.time()
        self.attempts.append(
            {
                "event": delivery.event.id,
                "type": delivery.event.type,
                "endpoint": delivery.endpoint,
                "attempt": attempt,
                "duplicate": duplicate,
                "outcome": outcome,
                "status": status,
                "error": error,
                "fault": fault,
                "signature_timestamp": timestamp,
                "started_at": started if started is not None else finished,
                "finished_at": finished,
                "next_retry_at": None,
            }
        )

    # Control ---------------------------------------------------------------------------------

    def pause(self) -> None:
        self.paused = True
        self._resumed.clear()

    def resume(self) -> None:
        self.paused = False
        self._resumed.set()

    def status(self) -> Record:
        queued = sum(len(queue) for queue in self._queues.values())
        counts = {
            "queued": queued,
            "in_flight": self._in_flight,
            "scheduled": len(self._timers),
            "holding": self._holding,
            "recorded": len(self._store().events.fresh) + self._drain_scheduled,
        }
        return {"paused": self.paused, "idle": not any(counts.values()), **counts}

    async def wait(self, timeout: float) -> Record:
        """Wait until nothing is queued, in flight, scheduled or held (or ``timeout``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            status = self.status()
            if status["idle"] or loop.time() >= deadline:
                return status
            await asyncio.sleep(min(0.01, max(0.0, deadline - loop.time())))

    def reset(self) -> None:
        """Forget every delivery, the log, faults, the pause and the schedule."""
        for worker in self._workers.values():
            worker.cancel()
        for handle in self._timers:
            handle.cancel()
        self._workers.clear()
        self._timers.clear()
        self._queues.clear()  # (cancelled workers still count down what they had in hand)
        self.attempts.clear()
        self.faults.clear()
        self.faults.seed(0)
        self.schedule = RetrySchedule()
        self.resume()

    async def close(self) -> None:
        self.reset()
        if self._client is not None:
            await self._client.aclose()
            self._client = None
