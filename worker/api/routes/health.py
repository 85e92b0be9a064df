"""``/healthz`` (the process answers) and ``/readyz`` (its database, Redis and a worker do)."""

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
        return JSONResponse({"status": "ready"})
    checks = await to_thread.run_sync(_readiness, state)
    ready = all(value == "ok" for value in checks.values())
    if ready:
        state.ready_until = time.monotonic() + 5.0
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status_code=200 if ready else 503,
    )


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
