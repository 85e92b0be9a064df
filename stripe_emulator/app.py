"""The ASGI application: Stripe's API plus the admin API, in one Starlette app."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette

from stripe_emulator import admin, hosted_invoices
from stripe_emulator.api import StripeAPI
from stripe_emulator.config import EmulatorConfig
from stripe_emulator.emulator import Emulator

logger = logging.getLogger("stripe_emulator")

ADMIN_PREFIX = "/_emulator"


class EmulatorApp(Starlette):
    """A Starlette app whose Stripe API requests bypass the middleware stack.

    Everything outside ``/_emulator`` (``/v1/...`` and any unknown path, which Stripe answers
    with its own 404) goes straight to :class:`StripeAPI`, the hot path; the admin routes and
    the lifespan go through Starlette as usual.
    """

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator
        self.stripe_api = StripeAPI(emulator)
        super().__init__(
            routes=[*admin.routes(emulator), *hosted_invoices.routes(emulator)],
            lifespan=self._lifespan,
        )

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        yield
        self.emulator.faults.release_hangs()
        await self.emulator.webhooks.close()
        if self.emulator.config.state_file is not None:
            path = self.emulator.save()
            logger.info("stripe emulator state saved to %s", path)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not scope["path"].startswith(ADMIN_PREFIX):
            await self.stripe_api(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def create_app(config: EmulatorConfig) -> EmulatorApp:
    """Build an emulator app; loads ``config.state_file`` if it exists (saved on shutdown)."""
    emulator = Emulator(config)
    if config.state_file is not None and config.state_file.exists():
        emulator.load(config.state_file)
    return EmulatorApp(emulator)
