"""``GET /asyncapi.json``: the AsyncAPI document of the queues, webhooks and event stream.

Beside ``/openapi.json`` and, like it, public: it describes the contract, no one's data. Not
in the OpenAPI document (it is not an operation of the HTTP API). The same text as
``schemas/asyncapi.json``, made from the models (``adapters.contracts.schemas``), so the API
needs no file of the repository.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from adapters.contracts.schemas import asyncapi_json

router = APIRouter(tags=["contracts"])


@router.get("/asyncapi.json", include_in_schema=False)
async def asyncapi() -> Response:
    return Response(asyncapi_json(), media_type="application/json")
