"""The FastAPI application, assembled: state, error handlers, middlewares and routers.

Routes live in ``worker/api/routes/`` (one router per resource), authentication in
``auth.py``, body reading in ``body.py``, the pre-routing refusals in ``middleware.py`` and
what routes share in ``state.py``. The API reaches the database and the queues only through
the ports the composition root (``worker.bootstrap``) hands it: no module here imports
SQLAlchemy or ``adapters.db`` (tests/unit/test_layers.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from adapters.messaging.redis_clients import async_redis_client
from worker.api.body import MAX_BODY_BYTES
from worker.api.client_share import ClientShare
from worker.api.console import install_console
from worker.api.errors import install_error_handlers
from worker.api.gateway import CommandGateway
from worker.api.middleware import BodySizeLimit, HttpMetrics, ThrottledSources
from worker.api.openapi import install_openapi
from worker.api.organizations import KnownOrganizations
from worker.api.results import ResultListener
from worker.api.routes import (
    OPENAPI_TAGS,
    asyncapi,
    billing,
    commands,
    health,
    metrics,
    operations,
    operator_actions,
    stripe_webhooks,
    subscriptions,
    users,
    webhooks,
)
from worker.api.shared_throttle import SharedFailures
from worker.api.sources import ClientFromTrustedProxy, TrustedProxies
from worker.api.state import ApiState, RefusalHold
from worker.api.tracing import trace_requests
from worker.api.verifications import Verifications
from worker.bootstrap import Services, bootstrap
from worker.process_signals import configure_logging, start_api_tracing, stop_api_tracing

ROUTERS = (
    users.router,
    billing.router,
    subscriptions.router,
    commands.router,
    webhooks.router,
    operations.router,
    operator_actions.router,
    stripe_webhooks.router,
    health.router,
    metrics.router,
    asyncapi.router,
)


def create_app(svc: Services | None = None) -> FastAPI:
    """The API over ``svc`` (bootstrapped from the settings when ``None``, at startup)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        resolved = svc or bootstrap()
        settings = resolved.settings
        redis = async_redis_client(settings)
        results = ResultListener(redis, settings.heartbeat_interval_seconds)
        await results.start()
        authenticator = resolved.client_verifier()
        # In Redis: every API process on the port counts the same failures.
        window = settings.auth_failure_window_seconds
        failures_by_source_and_client = SharedFailures(
            redis, "source-client", settings.auth_max_failures_per_source_and_client, window
        )
        failures_by_source = SharedFailures(
            redis, "source", settings.auth_max_failures_per_source, window
        )
        refusal_hold = RefusalHold(
            settings.auth_throttled_hold_seconds, settings.auth_max_held_refusals
        )
        app.state.api = ApiState(
            svc=resolved,
            gateway=CommandGateway(
                resolved.commands,
                resolved.celery_app(),
                resolved.publisher(),
                results,
                settings.http_wait_timeout_seconds,
                known_organizations=KnownOrganizations(
                    resolved.organizations(), hold_refusal=refusal_hold.hold
                ),
                client_share=ClientShare(
                    redis,
                    settings.client_commands_per_second,
                    settings.client_command_burst,
                    settings.client_total_commands_per_second,
                    settings.client_total_command_burst,
                ),
                is_transient=Services.is_transient,
            ),
            authenticator=authenticator,
            failures_by_source_and_client=failures_by_source_and_client,
            failures_by_source=failures_by_source,
            verifications=Verifications(
                authenticator, failures_by_source_and_client, failures_by_source
            ),
            refusal_hold=refusal_hold,
            stripe_failures_by_source=SharedFailures(
                redis, "stripe-source", settings.stripe_webhook_max_failures_per_source, window
            ),
            trusted_proxies=TrustedProxies.of(settings.api_trusted_proxies),
        )
        yield
        await results.stop()
        await redis.aclose()
        stop_api_tracing()  # the spans still buffered are sent before the process exits

    # Swagger UI and ReDoc from a package's files, not a CDN: /docs works offline.
    app = FastAPIOffline(
        # A trailing slash is a 404 like any unknown path, never a redirect built from Host.
        redirect_slashes=False,
        title="billing-worker",
        version="v1beta1",
        summary="Billing, user and subscription operations, performed in the background.",
        openapi_tags=OPENAPI_TAGS,
        lifespan=lifespan,
    )
    install_error_handlers(app, is_transient=Services.is_transient)
    install_openapi(app)
    app.add_middleware(BodySizeLimit, limit=MAX_BODY_BYTES)
    app.add_middleware(ThrottledSources)  # the cheapest refusal first
    # Before any refusal: every source is counted as the socket (or a trusted proxy) says.
    app.add_middleware(ClientFromTrustedProxy)
    app.add_middleware(HttpMetrics)  # outermost: refusals before routing count too
    for router in ROUTERS:
        app.include_router(router)
    install_console(app)  # the operator's pages, under /console
    trace_requests(app)  # outermost, once tracing started (asgi_app): off by default
    return app


def asgi_app() -> FastAPI:
    """Factory for ``uvicorn --factory worker.api.app:asgi_app``. uvicorn calls it before it
    logs anything of its own, so every line of the process is in the configured format."""
    configure_logging()
    start_api_tracing()
    return create_app()
