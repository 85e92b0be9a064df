"""The OpenAPI document: each route's request body, answers, headers and security, from the
pydantic models of ``contract.py``.

Routes take their body through the strict JSON reader (``body.py``), so FastAPI cannot infer
it: each command route declares it here with :func:`command_operation`, and
:func:`install_openapi` adds the request models' schemas, the Basic security scheme and the
error answers FastAPI does not know about (a 413 before routing, a 429 from the throttle).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from worker.api.contract import (
    AddWebhookRequest,
    ChangeSubscriptionPlanRequest,
    CommandAccepted,
    CreateBillingAccountRequest,
    DisableWebhookRequest,
    EmptyRequest,
    ErrorBody,
    OperatorActionRequest,
)

SECURITY_SCHEME = "basicAuth"
GET_COMMAND = "get_command"

REQUEST_MODELS: tuple[type[BaseModel], ...] = (
    EmptyRequest,
    CreateBillingAccountRequest,
    ChangeSubscriptionPlanRequest,
    AddWebhookRequest,
    DisableWebhookRequest,
    OperatorActionRequest,
)

_STRING = {"schema": {"type": "string"}}

COMMAND_ID_HEADER = {"Command-Id": {"description": "The command this request made.", **_STRING}}
RETRY_AFTER_HEADER = {
    "Retry-After": {
        "description": "Seconds to wait before trying again.",
        "schema": {"type": "integer", "minimum": 0},
    }
}

ERROR_MEANINGS: dict[int, str] = {
    400: "The request was malformed or contained invalid parameters (`3 INVALID_ARGUMENT`), "
    "or the resource is not in a state that allows it (`9 FAILED_PRECONDITION`).",
    401: "Authentication is required: credentials missing, wrong, or of a disabled client.",
    403: "The client lacks the permission the operation needs (`7 PERMISSION_DENIED`); "
    "the permission is named in an `ErrorInfo` detail.",
    404: "The requested resource was not found.",
    408: "The request did not arrive within the server's deadline.",
    409: "The resource already exists (`6 ALREADY_EXISTS`), or the request met a change "
    "under way and can be sent again shortly (`10 ABORTED`).",
    413: "The body is larger than 4 MiB.",
    415: "The body is not `application/json` in UTF-8.",
    422: "The `Idempotency-Key` was used before with a different request.",
    429: "Too many failed authentications from this client id or address, or (`8 "
    "RESOURCE_EXHAUSTED`, reason `CLIENT_COMMAND_RATE_EXCEEDED`) more new commands than the "
    "client's share (`BILLING_CLIENT_COMMANDS_PER_SECOND`); `Retry-After` says when to try "
    "again.",
    500: "Internal server error: something is wrong on the server.",
    503: "A dependency stayed unavailable for the whole retry budget.",
}

ERROR_HEADERS: dict[int, dict[str, Any]] = {
    401: {
        "WWW-Authenticate": {
            "description": 'The Basic challenge: `Basic realm="billing-worker"`.',
            **_STRING,
        }
    },
    429: RETRY_AFTER_HEADER,
    503: RETRY_AFTER_HEADER,
}

# What every authenticated route may answer before its own logic runs.
COMMON_ERRORS = (400, 401, 403, 404, 408, 413, 415, 429, 500)


_DECLARED_REQUEST_MODELS: dict[str, type[BaseModel]] = {}
"""Every request model a route declared through :func:`command_operation` or
:func:`direct_operation`: its schema goes into the document's components with
:data:`REQUEST_MODELS`', so that no route's ``$ref`` points at nothing."""


def _json(model: type[BaseModel]) -> dict[str, Any]:
    _DECLARED_REQUEST_MODELS.setdefault(model.__name__, model)
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}


def error_responses(statuses: Iterable[int]) -> dict[int | str, dict[str, Any]]:
    """The spec's error body (section 7) on each of ``statuses``, and as the default."""
    answers: dict[int | str, dict[str, Any]] = {
        status: {
            "model": ErrorBody,
            "description": ERROR_MEANINGS[status],
            "headers": ERROR_HEADERS.get(status, {}),
        }
        for status in sorted(set(statuses))
    }
    answers["default"] = {"model": ErrorBody, "description": "An unexpected error."}
    return answers


IDEMPOTENCY_KEY_PARAMETER = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "The same key from the same client returns the same command (and its "
    "outcome) instead of running a second one; with a different request it is a 422.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x21-\\x7e]+$"},
}
PREFER_PARAMETER = {
    "name": "Prefer",
    "in": "header",
    "required": False,
    "description": "`respond-async` (RFC 7240): answer 202 at once, without waiting.",
    "schema": {"type": "string"},
    "example": "respond-async",
}


def command_operation(
    *,
    request: type[BaseModel],
    answer: type[BaseModel],
    answer_description: str,
    errors: Iterable[int],
    answer_headers: Mapping[str, Any] | None = None,
    examples: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``responses`` and ``openapi_extra`` of a route that runs a command: its body, its
    200, the 202 of an asynchronous answer, and ``errors`` besides :data:`COMMON_ERRORS`."""
    content = _json(request)
    if examples:
        content["application/json"]["examples"] = {
            name: {"value": value} for name, value in examples.items()
        }
    return {
        "responses": {
            200: {
                "model": answer,
                "description": answer_description,
                "headers": {**COMMAND_ID_HEADER, **(answer_headers or {})},
            },
            202: {
                "model": CommandAccepted,
                "description": "Accepted: the command runs in the background (`Prefer: "
                "respond-async`, or the wait ended first). Its outcome is at `Location`.",
                "headers": {
                    **COMMAND_ID_HEADER,
                    "Location": {"description": "`/v1beta1/commands/{id}`", **_STRING},
                    "Preference-Applied": {
                        "description": "`respond-async`, when the request asked for it "
                        "(`Prefer: respond-async`); absent when a synchronous wait ran out.",
                        **_STRING,
                    },
                },
                "links": {
                    "GetCommand": {
                        "operationId": GET_COMMAND,
                        "parameters": {"id": "$response.body#/command_id"},
                        "description": "The command's status, and its outcome once it ends.",
                    }
                },
            },
            **error_responses([*COMMON_ERRORS, 422, *errors]),
        },
        "openapi_extra": {
            "requestBody": {"required": True, "content": content},
            "parameters": [IDEMPOTENCY_KEY_PARAMETER, PREFER_PARAMETER],
        },
    }


def direct_operation(
    *,
    answer: type[BaseModel],
    answer_description: str,
    request: type[BaseModel] | None = None,
    status: int = 200,
    errors: Iterable[int] = (),
    answer_headers: Mapping[str, Any] | None = None,
    examples: Mapping[str, Any] | None = None,
    links: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``responses`` (and ``openapi_extra``) of a route answered at once, without a
    command: its body if it takes one, its answer on ``status``, and ``errors`` besides
    :data:`COMMON_ERRORS`."""
    answer_doc: dict[str, Any] = {
        "model": answer,
        "description": answer_description,
        "headers": dict(answer_headers or {}),
    }
    if links:
        answer_doc["links"] = dict(links)
    operation: dict[str, Any] = {
        "responses": {status: answer_doc, **error_responses([*COMMON_ERRORS, *errors])}
    }
    if request is not None:
        content = _json(request)
        if examples:
            content["application/json"]["examples"] = {
                name: {"value": value} for name, value in examples.items()
            }
        operation["openapi_extra"] = {"requestBody": {"required": True, "content": content}}
    return operation


def install_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` add what FastAPI cannot see: the request models' schemas and
    the Basic security scheme, required by every operation but the health checks."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        document = get_openapi(
            title=app.title,
            version=app.version,
            summary=app.summary,
            description=app.description,
            routes=app.routes,
            tags=app.openapi_tags,
        )
        components = document.setdefault("components", {})
        schemas = components.setdefault("schemas", {})
        _, definitions = models_json_schema(
            [
                (model, "validation")
                for model in dict.fromkeys([*REQUEST_MODELS, *_DECLARED_REQUEST_MODELS.values()])
            ],
            ref_template="#/components/schemas/{model}",
        )
        for name, schema in definitions.get("$defs", {}).items():
            schemas.setdefault(name, schema)
        components["securitySchemes"] = {
            SECURITY_SCHEME: {
                "type": "http",
                "scheme": "basic",
                "description": "The client id as user name, the client secret as password "
                "(`billing-worker clients create` prints them).",
            }
        }
        for path, operations in document["paths"].items():
            if path.startswith("/v1beta1/"):
                for operation in operations.values():
                    operation["security"] = [{SECURITY_SCHEME: []}]
        app.openapi_schema = document
        return document

    app.openapi = openapi  # type: ignore[method-assign]
