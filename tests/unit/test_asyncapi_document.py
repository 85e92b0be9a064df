"""``schemas/asyncapi.json`` is a valid AsyncAPI 3.0.0 document naming every queue, command,
webhook and stream message with its schema.

``asyncapi-3.0.0.json`` beside this file is the AsyncAPI 3.0.0 JSON Schema
(asyncapi/spec-json-schemas, ``schemas/3.0.0-without-$id.json``, Apache-2.0).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from jsonschema.protocols import Validator

from adapters.contracts.schemas import (
    ASYNCAPI_FILE,
    COMMAND_TYPES,
    SCHEMAS_DIR,
    command_file,
    event_file,
)
from domain.events.catalog import EVENT_TYPES


@pytest.fixture(scope="module")
def asyncapi() -> Validator:
    schema = json.loads((Path(__file__).parent / "asyncapi-3.0.0.json").read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMAS_DIR / ASYNCAPI_FILE).read_text())
    return loaded


def resolve(document: dict[str, Any], reference: dict[str, str]) -> Any:
    """What ``reference`` points to, following references to references."""
    node: Any = document
    for part in reference["$ref"].removeprefix("#/").split("/"):
        node = node[part]
    return resolve(document, node) if "$ref" in node else node


def test_the_document_is_valid_asyncapi_3_0_0(
    asyncapi: Validator, document: dict[str, Any]
) -> None:
    errors = [f"{e.json_path}: {e.message[:200]}" for e in asyncapi.iter_errors(document)]

    assert errors == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("operations", "receiveUsersCommands", "action"), "consume"),
        (("channels", "users", "messages", "users.enable", "$ref"), 7),
        (("components", "messages", "webhooks.user.enabled.v1", "headers"), "webhook-id"),
        (("servers", "redis", "host"), None),
    ],
)
def test_the_validation_refuses_a_broken_document(
    asyncapi: Validator, document: dict[str, Any], path: tuple[str, ...], value: Any
) -> None:
    broken = copy.deepcopy(document)
    node = broken
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value

    assert not asyncapi.is_valid(broken)


def test_each_command_queue_is_a_channel_the_worker_receives_its_commands_on(
    document: dict[str, Any],
) -> None:
    received = {
        operation["channel"]["$ref"].removeprefix("#/channels/"): [
            resolve(document, message)["name"] for message in operation["messages"]
        ]
        for operation in document["operations"].values()
        if operation["action"] == "receive"
    }

    assert received == {
        "users": ["users.enable"],
        "billing": ["billing.create_account", "billing.register_account", "stripe.sync_object"],
        "subscriptions": [
            "subscriptions.change_plan",
            "subscriptions.preview_plan_change",
            "subscriptions.apply_scheduled_change",
            "subscriptions.finish_staged_withdrawal",
        ],
    }
    assert {document["channels"][queue]["address"] for queue in received} == set(received)


@pytest.mark.parametrize("command", COMMAND_TYPES, ids=lambda command: command.TASK_NAME)
def test_a_command_message_names_its_task_version_and_schema(
    document: dict[str, Any], command: Any
) -> None:
    schema = json.loads((SCHEMAS_DIR / command_file(command)).read_text())
    message = resolve(document, document["channels"][command.QUEUE]["messages"][command.TASK_NAME])
    payload = resolve(document, message["payload"])

    assert message["name"] == command.TASK_NAME
    assert message["headers"]["properties"]["task"] == {"const": command.TASK_NAME}
    assert message["x-contract-version"] == 1
    assert schema["$id"] in message["description"]
    assert payload["properties"].keys() == schema["properties"].keys()
    assert payload["required"] == schema["required"]


def test_every_event_type_is_a_message_of_the_webhooks_and_of_the_stream(
    document: dict[str, Any],
) -> None:
    sent = {
        operation["channel"]["$ref"]: {
            resolve(document, message)["name"] for message in operation["messages"]
        }
        for operation in document["operations"].values()
        if operation["action"] == "send"
    }

    assert sent["#/channels/webhooks"] == set(EVENT_TYPES)
    assert sent["#/channels/events"] == set(EVENT_TYPES)
    assert document["channels"]["events"]["address"] == "billing:events"
    assert document["operations"]["deliverWebhooks"]["bindings"]["http"]["method"] == "POST"


@pytest.mark.parametrize("event_type", sorted(EVENT_TYPES))
def test_an_event_message_carries_its_schema_and_its_channel_headers(
    document: dict[str, Any], event_type: str
) -> None:
    event = EVENT_TYPES[event_type]
    schema = json.loads((SCHEMAS_DIR / event_file(event)).read_text())
    webhook = resolve(document, document["channels"]["webhooks"]["messages"][event_type])
    entry = resolve(document, document["channels"]["events"]["messages"][event_type])

    assert webhook["payload"] == entry["payload"]
    assert resolve(document, webhook["payload"])["required"] == schema["required"]
    assert schema["$id"] in webhook["description"]
    assert set(webhook["headers"]["required"]) == {
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
    }
    assert entry["headers"]["properties"]["type"] == {"const": event_type}


@pytest.mark.parametrize(
    ("signature", "valid"),
    [
        ("v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=", True),
        ("v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= v1,bm9wZQ==", True),
        ("v1a,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=", False),
        ("K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=", False),
    ],
)
def test_the_webhook_signature_header_is_standard_webhooks_v1(
    document: dict[str, Any], signature: str, valid: bool
) -> None:
    headers = resolve(document, {"$ref": "#/components/messages/webhooks.user.enabled.v1"})[
        "headers"
    ]
    values = {
        "webhook-id": "evt_1",
        "webhook-timestamp": "1763884800",
        "webhook-signature": signature,
    }

    assert jsonschema.Draft7Validator(headers).is_valid(values) is valid
