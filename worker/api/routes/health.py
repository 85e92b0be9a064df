"""``/healthz`` (the process answers) and ``/readyz`` (its database, Redis and a worker do).

``/readyz`` also names the long-running loops that have gone silent (``silent_loops``:
``adapters/messaging/heartbeats.py``), a worker node that runs and answers pings but no longer
consumes among them. They do not make the API unready: it takes requests as well as before,
and a load balancer taking every API out of service for a stalled sweep would turn one fault
into an outage. Alert ``BillingLoopSilent`` pages for them.
"""

from __future__ import annotations

import time

from anyio import to_thread
from fastapi import APIRouter
from fastapi.responses import JSONResponse

from worker.api.state import ApiState, State

router = APIRouter(tags=["health"])


@router.get("/healthz", include_in_schema=False)
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", include_in_schema=False)
async def readyz(state: State) -> JSONResponse:
    if state.ready_until > time.monotonic():
        return JSONResponse({"status": "ready", "silent_loops": state.silent_loops})
    checks = await to_thread.run_sync(_readiness, state)
    ready = all(value == "ok" for value in checks.values())
    state.silent_loops = await to_thread.run_sync(_silent_loops, state)
    if ready:
        state.ready_until = time.monotonic() + 5.0
    return JSONResponse(
        {
            "status": "ready" if ready else "not ready",
            "checks": checks,
            "silent_loops": state.silent_loops,
        },
        status_code=200 if ready else 503,
    )


def _silent_loops(state: ApiState) -> dict[str, dict[str, float]]:
    """Each loop silent past its limit: for how long, and its limit (seconds). Redis away:
    none named (the ``redis`` check says so)."""
    try:
        silences = state.svc.heartbeats().silences(state.svc.settings.loop_silence_seconds)
    except Exception:
        return {}
    return {
        silence.loop: {
            "silent_for_seconds": round(silence.seconds, 1),
            "limit_seconds": silence.limit,
        }
        for silence in silences
        if silence.silent
    }


def _readiness(state: ApiState) -> dict[str, str]:
    checks: dict[str, str] = {}
    try:
        state.svc.ping_database()
        checks["database"] = "ok"
    except Exception as error:
        checks["database"] = f"error: {type(error).__name__}"
    celery = state.gateway.celery
    try:
        with celery.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=1)
        checks["redis"] = "ok"
    except Exception as error:
        checks["redis"] = f"error: {type(error).__name__}"
    try:
        replies = celery.control.ping(timeout=1.0)
        checks["worker"] = "ok" if replies else "no worker answered"
    except Exception as error:
        checks["worker"] = f"error: {type(error).__name__}"
    return checks
