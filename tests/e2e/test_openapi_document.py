"""The served OpenAPI document says what the API does: every path and every field of spec
sections 2.1 to 2.3 and 4.1 to 4.3 with its type, the error body on every status, the headers, the
Basic security scheme; and openapi-spec-validator accepts it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from openapi_spec_validator import validate

from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

CREATE = "/v1beta1/organizations/{org_id}/billing"
REGISTER = "/v1beta1/organizations/{org_id}/billing/{id}/register"
ENABLE = "/v1beta1/users/{id}/enable"
CHANGE = "/v1beta1/organizations/{org_id}/billing/{billing_id}/subscriptions/{id}/change"
COMMAND = "/v1beta1/commands/{id}"
WEBHOOKS = "/v1beta1/webhooks"
WEBHOOK_ROUTES = {
    (WEBHOOKS, "post"),
    (WEBHOOKS, "get"),
    (f"{WEBHOOKS}/{{id}}", "get"),
    (f"{WEBHOOKS}/{{id}}/disable", "post"),
    (f"{WEBHOOKS}/{{id}}/enable", "post"),
    (f"{WEBHOOKS}/{{id}}/rotate-secret", "post"),
    (f"{WEBHOOKS}/{{id}}/deliveries", "get"),
    (f"{WEBHOOKS}/deliveries/{{id}}/replay", "post"),
}

STRING, DATE_TIME, OBJECT, ARRAY, BOOLEAN = (
    {"type": "string"},
    {"type": "string", "format": "date-time"},
    {"type": "object"},
    {"type": "array"},
    {"type": "boolean"},
)
BILLING_ACCOUNT = {  # spec 2.1
    "id": STRING,
    "org_id": STRING,
    "name": STRING,
    "email": STRING,
    "phone": STRING,
    "address": OBJECT,
    "provider_id": STRING,
    "provider": STRING,
    "currency": STRING,
    "state": STRING,
    "tax_data": ARRAY,
    "metadata": OBJECT,
    "created_at": DATE_TIME,
    "updated_at": DATE_TIME,
}
ADDRESS = dict.fromkeys(("line1", "line2", "city", "state", "postal_code", "country"), STRING)
TAX_ENTRY = {"type": STRING, "id": STRING}
ORGANIZATION = {  # spec 2.2
    "id": STRING,
    "name": STRING,
    "title": STRING,
    "metadata": OBJECT,
    "created_at": DATE_TIME,
    "updated_at": DATE_TIME,
    "state": STRING,
    "avatar": STRING,
}
PHASE = {"effective_at": DATE_TIME, "plan_id": STRING}  # spec 2.3
CREATE_BODY = {"body": OBJECT, "offline": BOOLEAN}  # spec 4.1
CREATE_BODY_BODY = {
    "name": STRING,
    "email": STRING,
    "phone": STRING,
    "address": OBJECT,
    "currency": STRING,
    "tax_data": ARRAY,
    "metadata": OBJECT,
}
CHANGE_BODY = {"plan": STRING, "immediate": BOOLEAN, "plan_change": OBJECT, "phase_change": OBJECT}


@pytest.fixture(scope="module")
def document(stack: Stack) -> dict[str, Any]:
    with stack.http() as http:
        response = http.get("/openapi.json")
    assert response.status_code == 200
    served: dict[str, Any] = response.json()
    return served


def resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The schema behind ``$ref``s, and behind ``anyOf: [X, null]`` (an optional field)."""
    while True:
        if "$ref" in schema:
            schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
        elif "anyOf" in schema:
            present = [s for s in schema["anyOf"] if s.get("type") != "null"]
            assert len(present) == 1, schema
            schema = present[0]
        else:
            return schema


def assert_fields(document: dict[str, Any], schema: dict[str, Any], fields: dict[str, Any]) -> None:
    properties = resolve(document, schema)["properties"]
    for name, expected in fields.items():
        assert name in properties, f"{name} is missing"
        actual = resolve(document, properties[name])
        if "enum" in actual:  # a state: a string of known values
            actual = {"type": "string", **actual}
        for key, value in expected.items():
            assert actual.get(key) == value, f"{name}: {key} is {actual.get(key)!r}"


def request_schema(document: dict[str, Any], path: str) -> dict[str, Any]:
    body = document["paths"][path]["post"]["requestBody"]
    assert body["required"] is True
    schema: dict[str, Any] = body["content"]["application/json"]["schema"]
    return schema


def answer_schema(document: dict[str, Any], path: str, status: str = "200") -> dict[str, Any]:
    (operation,) = document["paths"][path].values()
    schema: dict[str, Any] = operation["responses"][status]["content"]["application/json"]["schema"]
    return schema


def test_openapi_spec_validator_accepts_the_served_document(document: dict[str, Any]) -> None:
    validate(document)
    assert document["openapi"].startswith("3.1")


def every_reference(node: Any, where: str = "#") -> Iterator[tuple[str, str]]:
    """Each ``$ref`` in the document, and where it is."""
    if isinstance(node, dict):
        for name, value in node.items():
            if name == "$ref" and isinstance(value, str):
                yield where, value
            else:
                yield from every_reference(value, f"{where}/{name}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from every_reference(value, f"{where}/{index}")


def pointed_at(document: dict[str, Any], reference: str) -> Any:
    """What a local reference (``#/a/b``, RFC 6901) points at in the document."""
    assert reference.startswith("#/"), f"{reference} is not a reference within the document"
    node: Any = document
    for token in reference[2:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node


def test_every_reference_in_the_document_points_at_something(document: dict[str, Any]) -> None:
    # openapi-spec-validator does not resolve every $ref; a generated client does.
    references = list(every_reference(document))
    dangling = []
    for where, reference in references:
        try:
            pointed_at(document, reference)
        except (KeyError, IndexError, ValueError):
            dangling.append(f"{where} -> {reference}")

    assert len(references) > 50
    assert dangling == []


def test_every_path_of_the_spec_is_documented(document: dict[str, Any]) -> None:
    assert {CREATE, REGISTER, ENABLE, CHANGE, COMMAND} <= set(document["paths"])


def test_the_create_request_and_answer_carry_every_field_of_the_spec(
    document: dict[str, Any],
) -> None:
    request = request_schema(document, CREATE)
    assert_fields(document, request, CREATE_BODY)
    details = resolve(document, request)["properties"]["body"]
    assert_fields(document, details, CREATE_BODY_BODY)
    assert_fields(document, resolve(document, details)["properties"]["address"], ADDRESS)
    tax_data = resolve(document, resolve(document, details)["properties"]["tax_data"])
    assert_fields(document, tax_data["items"], TAX_ENTRY)
    assert resolve(document, request)["required"] == ["body"]

    answer = answer_schema(document, CREATE)
    assert_fields(document, answer, {"billing_account": OBJECT, "organization": OBJECT})
    properties = resolve(document, answer)["properties"]
    assert_fields(document, properties["billing_account"], BILLING_ACCOUNT)
    assert_fields(document, properties["organization"], ORGANIZATION)


def test_the_enable_request_and_answer_are_empty_objects(document: dict[str, Any]) -> None:
    for schema in (request_schema(document, ENABLE), answer_schema(document, ENABLE)):
        resolved = resolve(document, schema)
        assert resolved["type"] == "object"
        assert resolved["additionalProperties"] is False
        assert resolved.get("properties", {}) == {}


def test_the_change_request_marks_the_old_fields_deprecated_and_answers_the_phase(
    document: dict[str, Any],
) -> None:
    request = request_schema(document, CHANGE)
    assert_fields(document, request, CHANGE_BODY)
    properties = resolve(document, request)["properties"]
    assert properties["plan"]["deprecated"] is True
    assert properties["immediate"]["deprecated"] is True
    assert "deprecated" not in properties["plan_change"]
    assert_fields(document, properties["plan_change"], {"plan": STRING, "immediate": BOOLEAN})
    assert_fields(document, properties["phase_change"], {"cancel_upcoming_changes": BOOLEAN})

    answer = answer_schema(document, CHANGE)
    assert_fields(document, resolve(document, answer)["properties"]["phase"], PHASE)
    headers = document["paths"][CHANGE]["post"]["responses"]["200"]["headers"]
    assert "Deprecation" in headers


@pytest.mark.parametrize("path", [CREATE, REGISTER, ENABLE, CHANGE])
def test_a_command_route_documents_its_errors_headers_and_security(
    document: dict[str, Any], path: str
) -> None:
    operation = document["paths"][path]["post"]
    responses = operation["responses"]
    for status in ("400", "401", "403", "404", "413", "415", "422", "500", "503", "default"):
        schema = responses[status]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorBody"}, status
    assert_fields(
        document,
        {"$ref": "#/components/schemas/ErrorBody"},
        {"code": {"type": "integer", "format": "int32"}, "message": STRING, "details": ARRAY},
    )
    assert "WWW-Authenticate" in responses["401"]["headers"]
    assert "Retry-After" in responses["429"]["headers"]
    assert {"Location", "Command-Id"} <= set(responses["202"]["headers"])
    assert {p["name"] for p in operation["parameters"] if p["in"] == "header"} == {
        "Idempotency-Key",
        "Prefer",
    }
    assert operation["security"] == [{"basicAuth": []}]
    assert "HTTPValidationError" not in document["components"]["schemas"]
    assert operation["requestBody"]["content"]["application/json"]["examples"]


def answer_of(
    document: dict[str, Any], path: str, method: str, status: str = "200"
) -> dict[str, Any]:
    response = document["paths"][path][method]["responses"][status]
    schema: dict[str, Any] = response["content"]["application/json"]["schema"]
    return schema


@pytest.mark.parametrize(("path", "method"), sorted(WEBHOOK_ROUTES))
def test_a_webhook_route_documents_its_errors_and_security_and_no_command(
    document: dict[str, Any], path: str, method: str
) -> None:
    operation = document["paths"][path][method]
    responses = operation["responses"]

    for status in ("400", "401", "403", "404", "500", "default"):
        schema = responses[status]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorBody"}, status
    assert operation["security"] == [{"basicAuth": []}]
    assert "webhooks:manage" in operation["description"]
    # Configuration, answered at once: no command, so no 202 and no idempotency key.
    assert "202" not in responses
    assert "Idempotency-Key" not in {p["name"] for p in operation.get("parameters", [])}
    if method == "post":
        assert operation["requestBody"]["content"]["application/json"]["examples"]


def test_only_the_create_and_rotate_answers_carry_a_secret(document: dict[str, Any]) -> None:
    created = answer_of(document, WEBHOOKS, "post", "201")
    rotated = answer_of(document, f"{WEBHOOKS}/{{id}}/rotate-secret", "post")
    view = {
        "id": STRING,
        "url": STRING,
        "events": ARRAY,
        "description": STRING,
        "state": STRING,
        "created_at": DATE_TIME,
        "updated_at": DATE_TIME,
    }

    assert_fields(document, created, {**view, "secret": STRING})
    assert_fields(
        document, rotated, {**view, "secret": STRING, "previous_secret_expires_at": DATE_TIME}
    )
    assert {"Location", "Cache-Control"} <= set(
        document["paths"][WEBHOOKS]["post"]["responses"]["201"]["headers"]
    )
    listed = answer_of(document, WEBHOOKS, "get")
    others = [
        answer_of(document, f"{WEBHOOKS}/{{id}}", "get"),
        answer_of(document, f"{WEBHOOKS}/{{id}}/enable", "post"),
        answer_of(document, f"{WEBHOOKS}/{{id}}/disable", "post"),
        resolve(document, resolve(document, listed)["properties"]["webhooks"])["items"],
    ]
    for schema in others:
        properties = resolve(document, schema)["properties"]
        assert_fields(document, schema, view)
        assert "secret" not in properties


def test_an_added_endpoint_links_to_its_operations(document: dict[str, Any]) -> None:
    links = document["paths"][WEBHOOKS]["post"]["responses"]["201"]["links"]
    operation_ids = {
        operation["operationId"]
        for operations in document["paths"].values()
        for operation in operations.values()
    }

    assert {link["operationId"] for link in links.values()} <= operation_ids
    assert {"get_webhook", "disable_webhook", "list_webhook_deliveries"} <= {
        link["operationId"] for link in links.values()
    }
    assert all(link["parameters"] == {"id": "$response.body#/id"} for link in links.values())


def test_the_security_scheme_is_http_basic(document: dict[str, Any]) -> None:
    assert document["components"]["securitySchemes"]["basicAuth"] == {
        "type": "http",
        "scheme": "basic",
        "description": document["components"]["securitySchemes"]["basicAuth"]["description"],
    }


def test_every_operation_is_grouped_under_its_resource_s_declared_tag(
    document: dict[str, Any],
) -> None:
    declared = [tag["name"] for tag in document["tags"]]
    tag_of = {
        (path, method): operation.get("tags", [])
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    }

    assert all(tag["description"] for tag in document["tags"])
    assert {len(tags) for tags in tag_of.values()} == {1}
    assert {tags[0] for tags in tag_of.values()} == set(declared)
    assert tag_of[(ENABLE, "post")] == ["users"]
    assert tag_of[(CREATE, "post")] == ["billing accounts"]
    assert tag_of[(CHANGE, "post")] == ["subscriptions"]
    assert tag_of[(COMMAND, "get")] == ["commands"]
    assert {tuple(tag_of[route]) for route in WEBHOOK_ROUTES} == {("webhooks",)}
