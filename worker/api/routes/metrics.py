"""``GET /metrics``: the API process's Prometheus metrics, on the API's own port.

Not behind client authentication (Prometheus scrapes it; the figures name routes and command
types, never a client or a person) and not in the OpenAPI document: it is for operators, not
for the API's clients. Put it behind the proxy's rules when the API faces the internet.
"""

from __future__ import annotations

from functools import cache

from anyio import to_thread
from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

from adapters.observability.metrics import multiproc_dir, multiprocess_registry

router = APIRouter(tags=["health"])


@cache
def _registry() -> CollectorRegistry:
    """Several API processes on one port (``PROMETHEUS_MULTIPROC_DIR`` set): whichever answers
    adds up what all of them wrote, so one scrape shows the whole API."""
    return multiprocess_registry() if multiproc_dir() is not None else REGISTRY


@router.get("/metrics", include_in_schema=False)
async def metrics() -> Response:
    # Off the event loop: in multiprocess mode it reads every process's files.
    text = await to_thread.run_sync(generate_latest, _registry())
    return Response(text, media_type=CONTENT_TYPE_LATEST)
