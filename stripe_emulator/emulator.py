"""The emulator's state as one object, and the route table of the Stripe API it serves.

The state: the data (:class:`Store`, events and webhook endpoints included), the clock,
idempotency keys, faults, the rate limiter, the request log and the webhook dispatcher
(:mod:`stripe_emulator.webhooks`), which delivers the events of whichever store is current.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from stripe_emulator import billing
from stripe_emulator.clock import Clock
from stripe_emulator.config import EmulatorConfig
from stripe_emulator.faults import FaultEngine, RateLimiter
from stripe_emulator.idempotency import IdempotencyStore
from stripe_emulator.reqlog import RequestLog
from stripe_emulator.resources import (
    catalog,
    coupons,
    credit_notes,
    customers,
    events,
    invoices,
    subscription_schedules,
    subscription_search,
    subscription_updates,
    subscriptions,
    webhook_endpoints,
)
from stripe_emulator.resources.common import Endpoint
from stripe_emulator.state import STATE_VERSION, Store, load_json, save_json
from stripe_emulator.webhooks import Dispatcher

ENDPOINTS: tuple[Endpoint, ...] = (
    *customers.ROUTES,
    *catalog.ROUTES,
    *coupons.ROUTES,
    *subscription_search.ROUTES,
    *subscriptions.ROUTES,
    *subscription_updates.ROUTES,
    *subscription_schedules.ROUTES,
    *invoices.ROUTES,
    *credit_notes.ROUTES,
    *events.ROUTES,
    *webhook_endpoints.ROUTES,
)


class Router:
    """Method + path -> endpoint. Static paths are a dict lookup; templated ones a short scan
    of precompiled patterns (static first, so ``/v1/customers/search`` is never an id)."""

    def __init__(self, endpoints: Iterable[Endpoint]) -> None:
        self._static: dict[tuple[str, str], Endpoint] = {}
        self._dynamic: dict[str, list[tuple[re.Pattern[str], Endpoint]]] = {}
        for endpoint in endpoints:
            if "{" not in endpoint.template:
                self._static[(endpoint.method, endpoint.template)] = endpoint
                continue
            pattern = re.compile(re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", endpoint.template) + r"\Z")
            self._dynamic.setdefault(endpoint.method, []).append((pattern, endpoint))

    def match(self, method: str, path: str) -> tuple[Endpoint, dict[str, str]] | None:
        endpoint = self._static.get((method, path))
        if endpoint is not None:
            return endpoint, {}
        for pattern, candidate in self._dynamic.get(method, ()):
            found = pattern.match(path)
            if found is not None:
                return candidate, found.groupdict()
        return None


class Emulator:
    """Everything one emulator instance holds. All access happens on the event loop thread."""

    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        self.api_keys = frozenset({config.api_key, *config.extra_api_keys})
        self.router = Router(ENDPOINTS)
        self.clock = Clock()
        self.webhooks = Dispatcher(lambda: self.store)
        self.store = self._adopt(Store(config.event_log_size))
        self.idempotency = IdempotencyStore()
        self.faults = FaultEngine()
        self.limiter = RateLimiter(config.rate_limit_per_second)
        self.log = RequestLog(config.request_log_size)

    def tick(self) -> int:
        """Bring time-driven state up to now (renewals and their invoices, payment retries,
        expiries; idempotency keys)."""
        now = self.clock.now()
        billing.roll_subscriptions(self.store, now)
        self.idempotency.prune(now)
        return now

    def _adopt(self, store: Store) -> Store:
        """Wire a (new) store's event log to the clock and the webhook dispatcher."""
        store.events.clock = self.clock.now
        store.events.listener = self.webhooks.wake
        return store

    def reset(self) -> None:
        """Forget data (events and webhook endpoints included), idempotency keys, faults,
        deliveries, the logs and clock offset; release hangs."""
        self.webhooks.reset()
        self.store = self._adopt(Store(self.config.event_log_size))
        self.clock.reset()
        self.idempotency.clear()
        self.faults.clear()
        self.faults.seed(0)
        self.limiter.set(self.config.rate_limit_per_second)
        self.log.clear()

    # Persistence -----------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "clock_offset": self.clock.offset,
            "store": self.store.to_json(),
            "idempotency": self.idempotency.to_json(),
        }

    def save(self, path: Path | None = None) -> Path:
        target = path or self.config.state_file
        if target is None:
            raise ValueError("no state file configured")
        save_json(target, self.snapshot())
        return target

    def load(self, path: Path) -> None:
        document = load_json(path)
        self.webhooks.reset()
        self.store = self._adopt(Store.from_json(document["store"], self.config.event_log_size))
        self.clock.offset = float(document["clock_offset"])
        self.idempotency.clear()
        self.idempotency.load_json(document["idempotency"])
