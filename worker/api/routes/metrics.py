"""``GET /metrics``: the API process's Prometheus metrics, on the API's own port.

Not behind client authentication (Prometheus scrapes it; the figures name routes and command
types, never a client or a person) and not in the OpenAPI document: it is for operators, not
for the API's clients. Put it behind the proxy's rules when the API faces the internet.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

router = APIRouter(tags=["health"])


@router.get("/metrics", include_in_schema=False)
async def metrics() -> Response:
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
