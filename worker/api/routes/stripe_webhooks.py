"""``POST /webhooks/stripe``: Stripe's events in, verified, one read of their object each.

No Basic auth: Stripe signs every delivery (``Stripe-Signature``) with the endpoint's secret,
verified here over the raw body against every secret we accept (those `billing-worker stripe
webhooks register` stored, and ``BILLING_STRIPE_WEBHOOK_SECRETS``), within Stripe's 300 s
tolerance. A verified event we handle asks for a read of its object, coalesced per object
(``worker/api/stripe_syncs.py``): it joins the object's sync still waiting for a worker, or
records and publishes a new one, ``stripe:{object_type}:{object_id}:{generation}``, or needs
none (a read began after it); the answer is 200 once that is settled, before the read. An
event of a type we do not handle is answered 200 and counted. A bad, missing or stale
signature is a 400 with the error body, and records nothing; a body over 256 KiB is a 413.
Bad signatures cost an HMAC each and are never held back, so a flood of them does not slow
Stripe's valid deliveries.
"""

from __future__ import annotations

import time
from typing import Any

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from domain.errors import ErrorCode, error_info
from domain.operator_requests import ListStripeEndpointSecrets
from tasks.handlers.stripe_endpoints import stripe_endpoint_secrets
from worker.api.state import ApiState, State
from worker.api.stripe_syncs import take_in
from worker.observability import metrics
from worker.provider.stripe_adapter import BadSignature, verify_stripe_event

router = APIRouter()

MAX_EVENT_BYTES = 256 * 1024
"""Stripe's events are a few KiB; anything this large is not one."""
SECRETS_CACHE_SECONDS = 5.0


def _error(status: int, code: ErrorCode, message: str, reason: str) -> JSONResponse:
    body = {"code": int(code), "message": message, "details": [error_info(reason)]}
    return JSONResponse(body, status_code=status)


@router.post(
    "/webhooks/stripe",
    operation_id="receive_stripe_event",
    summary="Stripe's webhook events (signed by Stripe; no Basic auth)",
    description="Verifies `Stripe-Signature` over the raw body and answers 200 once the "
    "re-read of the event's object is recorded, before it runs: the events of one object "
    "that arrive while its sync waits join that sync (`duplicate`: true, its `command_id`), "
    "and an event older than the object's last read needs none (`command_id`: null). "
    "Unhandled event types are answered 200 and counted. A bad, "
    "missing or stale signature is a 400 and records nothing; a body over 256 KiB is a 413.",
    responses={
        200: {"description": "Received (recorded, a duplicate, or a type not handled)."},
        400: {"description": "The signature does not verify: nothing recorded."},
        413: {"description": "The body is larger than an event can be."},
    },
)
async def receive_stripe_event(request: Request, state: State) -> JSONResponse:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_EVENT_BYTES:
        return _too_large()
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > MAX_EVENT_BYTES:
            return _too_large()
    secrets = await _secrets(state)
    try:
        event = verify_stripe_event(bytes(body), request.headers.get("stripe-signature"), secrets)
    except BadSignature as refusal:
        metrics.stripe_event_received("unknown", "rejected")
        return _error(
            400, ErrorCode.INVALID_ARGUMENT, f"invalid Stripe webhook: {refusal}",
            "STRIPE_SIGNATURE_INVALID",
        )  # fmt: skip
    if not event.is_handled:
        metrics.stripe_event_received(event.type, "ignored")
        return JSONResponse({"received": True, "handled": False})
    intake = await to_thread.run_sync(take_in, state, event)
    metrics.stripe_event_received(event.type, intake.outcome)
    return JSONResponse(
        {
            "received": True,
            "handled": True,
            "command_id": intake.command_id,
            "duplicate": not intake.recorded,
        }
    )


def _too_large() -> JSONResponse:
    metrics.stripe_event_received("unknown", "too_large")
    return _error(
        413, ErrorCode.INVALID_ARGUMENT, f"a Stripe event is at most {MAX_EVENT_BYTES} bytes",
        "STRIPE_EVENT_TOO_LARGE",
    )  # fmt: skip


_cached: dict[str, Any] = {"at": -1e9, "secrets": []}


async def _secrets(state: ApiState) -> list[str]:
    """Every secret we accept: the settings' and the stored endpoints' (read every few
    seconds, so that `stripe webhooks register` takes effect without a restart)."""
    now = time.monotonic()
    if now - _cached["at"] > SECRETS_CACHE_SECONDS:
        stored = await to_thread.run_sync(
            stripe_endpoint_secrets, ListStripeEndpointSecrets(), state.svc
        )
        configured = [
            secret.strip()
            for secret in state.svc.settings.stripe_webhook_secrets.split(",")
            if secret.strip()
        ]
        _cached.update(at=now, secrets=configured + stored)
    secrets: list[str] = _cached["secrets"]
    return secrets
