"""The admin API's webhook routes, under ``/_emulator/webhooks`` (documented in ``admin.py``).

Delivery faults, the pause, the retry schedule, the delivery log and waiting for deliveries
(:mod:`stripe_emulator.webhooks`, :mod:`stripe_emulator.webhook_faults`).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request

from stripe_emulator.emulator import Emulator
from stripe_emulator.signatures import roll_secret
from stripe_emulator.webhooks import RetrySchedule

Handler = Callable[[Request], Awaitable[Any]]
MAX_WAIT_SECONDS = 300.0
MAX_RETRY_WAIT = 3 * 86_400.0
MAX_ROLL_EXPIRY = 86_400.0  # the Dashboard keeps an old secret for at most 24 hours

_FAULT_FIELDS = frozenset(
    {"kind", "match", "endpoint", "probability", "count", "seconds", "window", "order",
     "hold_seconds"}
)  # fmt: skip


def _finite(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def table(
    emulator: Emulator,
    body: Callable[[Request], Awaitable[dict[str, Any]]],
    error: Callable[..., Exception],
) -> list[tuple[str, str, Handler]]:
    """(method, path under ``/_emulator``, handler) for each webhook route; ``body`` reads a
    request's JSON object and ``error(message, status=400)`` makes the admin API's error."""
    dispatcher = emulator.webhooks

    async def status(request: Request) -> dict[str, Any]:
        return {**dispatcher.status(), "retry_schedule": dispatcher.schedule.to_json()}

    async def pause(request: Request) -> dict[str, Any]:
        dispatcher.pause()
        return dispatcher.status()

    async def resume(request: Request) -> dict[str, Any]:
        dispatcher.resume()
        return dispatcher.status()

    async def wait(request: Request) -> dict[str, Any]:
        timeout = (await body(request)).get("timeout", 10.0)
        if not _finite(timeout) or not 0 <= timeout <= MAX_WAIT_SECONDS:
            raise error(f"`timeout` must be a number of seconds in [0, {MAX_WAIT_SECONDS:g}]")
        return await dispatcher.wait(float(timeout))

    async def deliveries(request: Request) -> dict[str, Any]:
        event = request.query_params.get("event")
        endpoint = request.query_params.get("endpoint")
        return {
            "deliveries": [
                attempt
                for attempt in dispatcher.attempts
                if (event is None or attempt["event"] == event)
                and (endpoint is None or attempt["endpoint"] == endpoint)
            ]
        }

    async def clear_deliveries(request: Request) -> dict[str, Any]:
        dispatcher.attempts.clear()
        return {"deliveries": []}

    async def get_schedule(request: Request) -> dict[str, Any]:
        return dispatcher.schedule.to_json()

    async def set_schedule(request: Request) -> dict[str, Any]:
        fields = await body(request)
        unknown = set(fields) - {"delays", "timeout_seconds"}
        if unknown:
            raise error(f"unknown retry schedule fields: {', '.join(sorted(unknown))}")
        schedule = dispatcher.schedule
        delays = fields.get("delays", list(schedule.delays))
        if not isinstance(delays, list) or not all(
            _finite(delay) and 0 <= delay <= MAX_RETRY_WAIT for delay in delays
        ):
            raise error(f"`delays` must be a list of seconds in [0, {MAX_RETRY_WAIT:g}]")
        timeout = fields.get("timeout_seconds", schedule.timeout_seconds)
        if not _finite(timeout) or not 0 < timeout <= 60:
            raise error("`timeout_seconds` must be in (0, 60]")
        dispatcher.schedule = RetrySchedule(tuple(float(d) for d in delays), float(timeout))
        return dispatcher.schedule.to_json()

    async def list_faults(request: Request) -> dict[str, Any]:
        return {"faults": [rule.to_json() for rule in dispatcher.faults.rules]}

    async def add_fault(request: Request) -> dict[str, Any]:
        fields = await body(request)
        unknown = set(fields) - _FAULT_FIELDS
        if unknown:
            raise error(f"unknown delivery fault fields: {', '.join(sorted(unknown))}")
        if "kind" not in fields:
            raise error("`kind` is required")
        try:
            return dispatcher.faults.add(**fields).to_json()
        except (TypeError, ValueError) as failure:
            raise error(str(failure)) from failure

    async def clear_faults(request: Request) -> dict[str, Any]:
        dispatcher.faults.clear()
        return {"faults": []}

    async def remove_fault(request: Request) -> dict[str, Any]:
        rule_id = request.path_params["rule_id"]
        if not dispatcher.faults.remove(rule_id):
            raise error(f"no delivery fault {rule_id}", status=404)
        return {"removed": rule_id}

    async def roll(request: Request) -> dict[str, Any]:
        endpoint_id = request.path_params["endpoint_id"]
        expires_in = (await body(request)).get("expires_in", 0)
        if not _finite(expires_in) or not 0 <= expires_in <= MAX_ROLL_EXPIRY:
            raise error(f"`expires_in` must be a number of seconds in [0, {MAX_ROLL_EXPIRY:g}]")
        if endpoint_id not in emulator.store.webhook_endpoints:
            raise error(f"no webhook endpoint {endpoint_id}", status=404)
        return roll_secret(emulator.store, endpoint_id, float(expires_in))

    return [
        ("GET", "/webhooks", status),
        ("POST", "/webhooks/pause", pause),
        ("POST", "/webhooks/resume", resume),
        ("POST", "/webhooks/wait", wait),
        ("GET", "/webhooks/deliveries", deliveries),
        ("DELETE", "/webhooks/deliveries", clear_deliveries),
        ("GET", "/webhooks/retry_schedule", get_schedule),
        ("POST", "/webhooks/retry_schedule", set_schedule),
        ("GET", "/webhooks/faults", list_faults),
        ("POST", "/webhooks/faults", add_fault),
        ("DELETE", "/webhooks/faults", clear_faults),
        ("DELETE", "/webhooks/faults/{rule_id}", remove_fault),
        ("POST", "/webhooks/endpoints/{endpoint_id}/roll_secret", roll),
    ]
