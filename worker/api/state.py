"""What the API's routes share, kept on ``app.state.api`` and reached as a dependency."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from domain.ports.clients import ClientVerifier
from worker.api.gateway import CommandGateway
from worker.api.shared_throttle import SharedFailures
from worker.api.sources import TrustedProxies
from worker.api.verifications import Verifications
from worker.bootstrap import Services


@dataclass
class RefusalHold:
    """Holds throttled refusals before they are sent, so that a flooding client spends its
    time waiting rather than sending: a held request costs the API a timer, where an
    immediate refusal invites the next request at once. At most ``capacity`` are held at
    once; beyond that, refusals go out immediately. Per process, on purpose: what it bounds
    is this process's timers and connections (N processes hold up to N times as many),
    while the failures that decide a refusal are shared (``shared_throttle.py``)."""

    seconds: float
    capacity: int
    held: int = 0

    async def hold(self) -> None:
        if self.seconds <= 0 or self.held >= self.capacity:
            return
        self.held += 1
        try:
            await asyncio.sleep(self.seconds)
        finally:
            self.held -= 1


@dataclass
class ApiState:
    svc: Services
    gateway: CommandGateway
    authenticator: ClientVerifier
    failures_by_source_and_client: SharedFailures
    """Failed authentications per (source, client id): the limit a guesser of one client's
    secret meets, which never refuses that client from another source."""
    failures_by_source: SharedFailures
    verifications: Verifications
    refusal_hold: RefusalHold
    stripe_failures_by_source: SharedFailures
    """Stripe webhook deliveries refused for their signature or size, per source address."""
    trusted_proxies: TrustedProxies = field(default_factory=TrustedProxies)
    """Whose ``X-Forwarded-For`` names the source (``BILLING_API_TRUSTED_PROXIES``)."""
    ready_until: float = 0.0
    silent_loops: dict[str, dict[str, float]] = field(default_factory=dict)
    """The silent loops ``/readyz`` last found (shown while its answer is reused)."""


def api_state(request: Request) -> ApiState:
    """The application's :class:`ApiState` (set by ``create_app``'s lifespan)."""
    state: ApiState = request.app.state.api
    return state


async def _api_state(request: Request) -> ApiState:
    # A coroutine, so that FastAPI calls it on the event loop: a plain function as a
    # dependency is run on a worker thread, a trip there and back on every request.
    return api_state(request)


State = Annotated[ApiState, Depends(_api_state)]
