"""``POST /webhooks/stripe``: Stripe's events in, verified, one read of their object each.

No Basic auth: Stripe signs every delivery (``Stripe-Signature``) with the endpoint's secret,
verified here over the raw body against every secret we accept (those `billing-worker stripe
webhooks register` stored, and ``BILLING_STRIPE_WEBHOOK_SECRETS``), within Stripe's 300 s
tolerance either way. Every signed delivery is answered 2xx or 4xx, never 5xx (Stripe retries
a 5xx for three days), and whether it is recorded is decided before anything is recorded:

* a bad, missing, stale or future signature is a 400, and a body over 256 KiB a 413; both
  count against the source address, whose deliveries are answered 429 before their body is
  read (held like a throttled login's refusal) once it failed
  ``BILLING_STRIPE_WEBHOOK_MAX_FAILURES_PER_SOURCE`` times in the window (Stripe's own
  addresses never fail: they sign every delivery afresh);
* a signed body is read as strict JSON (no duplicate names, no NaN, at most 32 levels deep),
  and the event's id, ``type``, ``created`` and the id of the object it routes to are
  checked (Stripe's id alphabet, our caps; ``created`` at most
  ``EVENT_CREATED_AHEAD_LIMIT``, 10 minutes, ahead of our clock): a signed body that is not
  such an event is a 400 naming the field, recording nothing;
* an event we handle is handed to the application, which decides the read of its object,
  coalesced per object (``application/handlers/provider/stripe_events.py``): it joins the
  object's sync still waiting for a worker, or records and publishes a new one,
  ``stripe:{object_type}:{object_id}:{generation}``, or needs none (a read began after it); the
  answer is 200 once that is settled, before the read. An event of a type we do not handle is
  answered 200 and counted (as ``other``).
"""

from __future__ import annotations

import math
import time
from typing import Any

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from adapters.observability import metrics
from adapters.provider.stripe_events import NotAStripeEvent, event_of
from adapters.provider.stripe_signatures import BadSignature, verify_stripe_signature
from application.handlers.provider.stripe_endpoints import stripe_endpoint_secrets
from application.handlers.provider.stripe_events import take_in_stripe_event
from application.requests.operator_requests import ListStripeEndpointSecrets
from domain.errors import ErrorCode, error_info, field_violations
from domain.provider.sync import EVENT_CREATED_AHEAD_LIMIT, created_too_far_ahead
from worker.api.contract import ErrorBody
from worker.api.state import ApiState, State
from worker.api.strict_json import BodyRejected, parse_object

router = APIRouter(tags=["stripe events"])

MAX_EVENT_BYTES = 256 * 1024
"""Stripe's events are a few KiB; anything this large is not one."""
SECRETS_CACHE_SECONDS = 5.0


def _error(
    status: int,
    code: ErrorCode,
    message: str,
    reason: str,
    *,
    violation: tuple[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    details = [error_info(reason)]
    if violation is not None:
        details.append(field_violations([violation]))
    body = {"code": int(code), "message": message, "details": details}
    return JSONResponse(body, status_code=status, headers=headers)


@router.post(
    "/webhooks/stripe",
    operation_id="receive_stripe_event",
    summary="Stripe's webhook events (signed by Stripe; no Basic auth)",
    description="Verifies `Stripe-Signature` over the raw body (within 300 s of now, either "
    "way) and answers 200 once the re-read of the event's object is recorded, before it runs: "
    "the events of one object that arrive while its sync waits join that sync (`duplicate`: "
    "true, its `command_id`), and an event older than the object's last read needs none "
    "(`command_id`: null). Unhandled event types are answered 200 and counted. A bad, "
    "missing, stale or future signature is a 400 and records nothing, as is a signed body "
    "that is not a Stripe event (strict JSON, Stripe's id alphabet, `created` at most 10 "
    "minutes ahead of our clock); a body over 256 KiB is a "
    "413. A source address whose deliveries failed verification too often is answered 429 "
    "(with `Retry-After`) before its body is read.",
    responses={
        200: {"description": "Received (recorded, a duplicate, or a type not handled)."},
        400: {
            "model": ErrorBody,
            "description": "The signature does not verify, or the signed body is not a "
            "Stripe event: nothing recorded.",
        },
        413: {"model": ErrorBody, "description": "The body is larger than an event can be."},
        429: {
            "model": ErrorBody,
            "description": "Too many deliveries from this address failed verification.",
            "headers": {
                "Retry-After": {
                    "description": "Seconds to wait before trying again.",
                    "schema": {"type": "integer", "minimum": 0},
                }
            },
        },
    },
)
async def receive_stripe_event(request: Request, state: State) -> JSONResponse:
    # The peer address, or the client a trusted proxy forwarded (worker/api/sources.py): a
    # forger cannot name Stripe's addresses as its own and have them throttled.
    source = request.client.host if request.client else "?"
    failures = state.stripe_failures_by_source
    wait = await failures.retry_after(source)
    if wait is not None:
        # Held like a throttled login (a timer, not a read): the flooder waits instead of
        # sending its next forgery at once.
        await state.refusal_hold.hold()
        return _throttled(wait)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_EVENT_BYTES:
        await failures.failed(source)
        return _too_large()
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > MAX_EVENT_BYTES:
            await failures.failed(source)
            return _too_large()
    secrets = await _secrets(state)
    try:
        verify_stripe_signature(bytes(body), request.headers.get("stripe-signature"), secrets)
    except BadSignature as refusal:
        await failures.failed(source)
        metrics.stripe_event_received("unknown", "rejected")
        return _error(
            400, ErrorCode.INVALID_ARGUMENT, f"invalid Stripe webhook: {refusal}",
            "STRIPE_SIGNATURE_INVALID",
        )  # fmt: skip
    try:
        event = event_of(parse_object(bytes(body), control_characters=True))
    except BodyRejected as rejected:
        return _not_an_event(rejected.message, rejected.violations[0])
    except NotAStripeEvent as malformed:
        return _not_an_event(str(malformed), (malformed.field, malformed.description))
    # Our clock, not the host's: under a shifted clock (the local stack, the tests) Stripe's
    # emulator dates its events in the same shifted time.
    now = await to_thread.run_sync(state.svc.clock.now)
    if created_too_far_ahead(event.created, now):
        limit = int(EVENT_CREATED_AHEAD_LIMIT.total_seconds())
        return _not_an_event(
            f"created is more than {limit} s ahead of our clock",
            ("created", f"Unix seconds at most {limit} s after now"),
        )
    if not event.is_handled:
        metrics.stripe_event_received(event.type, "ignored")
        return JSONResponse({"received": True, "handled": False})
    intake = await to_thread.run_sync(take_in_stripe_event, event, state.svc)
    metrics.stripe_event_received(event.type, intake.outcome)
    return JSONResponse(
        {
            "received": True,
            "handled": True,
            "command_id": intake.command_id,
            "duplicate": not intake.recorded,
        }
    )


def _not_an_event(message: str, violation: tuple[str, str]) -> JSONResponse:
    """A body signed with our secret that is not a Stripe event we can route: refused
    (never a 500, which Stripe would retry for days), recorded nowhere."""
    metrics.stripe_event_received("unknown", "malformed")
    return _error(
        400, ErrorCode.INVALID_ARGUMENT, f"not a Stripe event: {message}",
        "STRIPE_EVENT_INVALID", violation=violation,
    )  # fmt: skip


def _throttled(wait: float) -> JSONResponse:
    metrics.stripe_event_received("unknown", "throttled")
    seconds = max(1, math.ceil(wait))
    return _error(
        429, ErrorCode.RESOURCE_EXHAUSTED,
        f"too many Stripe deliveries from this address failed verification; try again in "
        f"{seconds}s",
        "STRIPE_SIGNATURES_THROTTLED", headers={"Retry-After": str(seconds)},
    )  # fmt: skip


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
