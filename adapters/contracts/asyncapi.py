"""The AsyncAPI 3.0.0 document: the command queues billing-worker receives on, and the
webhooks and Redis stream it sends its events on.

It is self-contained (served at ``GET /asyncapi.json``, where no schema file is beside it):
each message's payload is its JSON Schema (the same as ``schemas/…``), under
``components.schemas``, with the definitions they share hoisted there too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.events.base import Event
from domain.messages import Command

EVENTS_STREAM = "billing:events"
"""The stream's default key (setting ``BILLING_EVENTS_STREAM``)."""

QUEUES = ("users", "billing", "subscriptions")

BEAT_PUBLISHES = ("subscriptions.apply_scheduled_change",)
"""Commands the system publishes itself (beat's sweep of due plan changes)."""

_REDIS = {"$ref": "#/servers/redis"}
_SIGNATURE = r"^v1,[A-Za-z0-9+/]+={0,2}( v1,[A-Za-z0-9+/]+={0,2})*$"

WEBHOOK_HEADERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "webhook-id": {
            "type": "string",
            "description": "The event's `id`: the same on every attempt; deduplicate on it.",
        },
        "webhook-timestamp": {
            "type": "string",
            "pattern": "^[0-9]+$",
            "description": "When this attempt was signed, in Unix seconds. Refuse a delivery "
            "whose timestamp is far from your clock (a replay).",
        },
        "webhook-signature": {
            "type": "string",
            "pattern": _SIGNATURE,
            "description": "`v1,<base64 HMAC-SHA256>` of `{webhook-id}.{webhook-timestamp}."
            "{body}` with the endpoint's secret (Standard Webhooks); several signatures are "
            "separated by spaces (while a secret is rotated): accept any that matches.",
        },
        "content-type": {"const": "application/json"},
        "user-agent": {"type": "string", "examples": ["billing-worker-webhooks/1"]},
    },
    "required": ["webhook-id", "webhook-timestamp", "webhook-signature"],
}


def _stream_fields(event_type: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": "The entry's other fields, to route or skip an entry without parsing "
        "`event`.",
        "properties": {
            "id": {"type": "string", "description": "The event's `id`."},
            "type": {"const": event_type},
            "subject": {
                "type": "string",
                "description": "`<subject.type>:<subject.id>`: entries of one subject are in "
                "the order their events happened.",
            },
        },
        "required": ["id", "type", "subject"],
    }


def _hoisted(
    name: str, schema: dict[str, Any], shared: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """``schema`` as a component: its ``$defs`` moved into ``shared`` (by name, once) and its
    references rewritten to point there."""

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            out = {key: rewrite(value) for key, value in node.items()}
            ref = out.get("$ref")
            if isinstance(ref, str):
                if not ref.startswith("#/$defs/"):
                    raise ValueError(f"{name}: cannot hoist the reference {ref!r}")
                out["$ref"] = "#/components/schemas/" + ref.removeprefix("#/$defs/")
            return out
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        return node

    for definition, body in schema.get("$defs", {}).items():
        body = rewrite(body)
        if shared.setdefault(definition, body) != body:
            raise ValueError(f"two different schemas are named {definition!r}")
    top = {
        key: rewrite(value)
        for key, value in schema.items()
        if key not in ("$schema", "$id", "$defs")
    }
    return {name: top}


def _summary(text: str) -> str:
    return text.strip().split("\n\n", 1)[0].replace("\n", " ")


def _command_message(command: type[Command], schema: dict[str, Any], key: str) -> dict[str, Any]:
    version = schema["properties"]["version"]["const"]
    return {
        "name": command.TASK_NAME,
        "title": f"{command.TASK_NAME} (contract version {version})",
        "summary": _summary(command.__doc__ or command.TASK_NAME),
        "description": (
            "A Celery task message (protocol 2, JSON serializer): its `task` header names "
            "the command; its body is `[[], kwargs, {…}]`, and the payload below is the "
            "`kwargs` (keyword arguments only). "
            f"JSON Schema: `schemas/commands/{command.TASK_NAME}.v{version}.json` "
            f"(`{schema['$id']}`)."
        ),
        "contentType": "application/json",
        "headers": {
            "type": "object",
            "properties": {
                "task": {"const": command.TASK_NAME},
                "id": {
                    "type": "string",
                    "description": "The task id: the command id when the kwargs name none.",
                },
            },
            "required": ["task", "id"],
        },
        "payload": {"$ref": f"#/components/schemas/{key}"},
        "x-contract-version": version,
        "x-queue": command.QUEUE,
    }


def _event_message(
    event: type[Event], schema: dict[str, Any], key: str, *, webhook: bool
) -> dict[str, Any]:
    where = (
        "The body of a `POST` to each subscribed endpoint."
        if webhook
        else "A stream entry: its `event` field is this payload as JSON text."
    )
    return {
        "name": event.TYPE,
        "title": f"{event.TYPE} (version {event.VERSION})",
        "summary": _summary(event.__doc__ or event.TYPE),
        "description": f"{where} JSON Schema: `schemas/events/{event.TYPE}.v{event.VERSION}"
        f".json` (`{schema['$id']}`).",
        "contentType": "application/json",
        "headers": WEBHOOK_HEADERS if webhook else _stream_fields(event.TYPE),
        "payload": {"$ref": f"#/components/schemas/{key}"},
    }


def asyncapi_document(
    commands: Mapping[type[Command], dict[str, Any]],
    events: Mapping[type[Event], dict[str, Any]],
) -> dict[str, Any]:
    """The document for ``commands`` and ``events``, each with its JSON Schema."""
    schemas: dict[str, Any] = {}
    shared: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}

    for queue in QUEUES:
        channels[queue] = {
            "address": queue,
            "title": f"The {queue} queue",
            "description": f"The Redis list `{queue}` of Celery task messages. Name the queue "
            "when publishing: a task sent without one lands on `celery`, which workers also "
            "consume. A message is at most 1 MiB, JSON only.",
            "servers": [_REDIS],
            "messages": {},
        }
    for command, schema in commands.items():
        key = f"command.{command.TASK_NAME}.v{schema['properties']['version']['const']}"
        schemas.update(_hoisted(key, schema, shared))
        messages[key] = _command_message(command, schema, key)
        channels[command.QUEUE]["messages"][command.TASK_NAME] = {
            "$ref": f"#/components/messages/{key}"
        }
    for queue in QUEUES:
        operations[f"receive{queue.title()}Commands"] = {
            "action": "receive",
            "channel": {"$ref": f"#/channels/{queue}"},
            "summary": f"A worker runs each command of the {queue} queue, once per command id.",
            "messages": [
                {"$ref": f"#/channels/{queue}/messages/{name}"}
                for name in channels[queue]["messages"]
            ],
        }
    operations["publishDueChanges"] = {
        "action": "send",
        "channel": {"$ref": "#/channels/subscriptions"},
        "summary": "Beat publishes an apply command for each plan change that fell due.",
        "messages": [
            {"$ref": f"#/channels/subscriptions/messages/{name}"} for name in BEAT_PUBLISHES
        ],
    }

    channels["webhooks"] = {
        "address": None,
        "title": "Webhook endpoints",
        "description": "Each subscribed endpoint's URL: every event of the types it "
        "subscribed to is POSTed there as JSON, signed with the endpoint's secret (Standard "
        "Webhooks). A 2xx answer acknowledges it; anything else is retried with backoff "
        "(honouring `Retry-After`) for about a day, so deduplicate by `webhook-id`. Events "
        "of one subject reach an endpoint in the order they happened.",
        "servers": [{"$ref": "#/servers/webhookEndpoint"}],
        "messages": {},
    }
    channels["events"] = {
        "address": EVENTS_STREAM,
        "title": "The event stream",
        "description": f"A Redis stream (key `{EVENTS_STREAM}`, setting "
        "`BILLING_EVENTS_STREAM`), capped with an approximate `MAXLEN`: read it through a "
        "consumer group (`XREADGROUP`, then `XACK` each entry handled). Each entry has the "
        "fields `id`, `type`, `subject` and `event` (the event's JSON). Entries of one "
        "subject are in order; an entry may come twice, so deduplicate by `id`.",
        "servers": [_REDIS],
        "messages": {},
    }
    for event, schema in events.items():
        key = f"event.{event.TYPE}.v{event.VERSION}"
        schemas.update(_hoisted(key, schema, shared))
        for channel, webhook in (("webhooks", True), ("events", False)):
            message = f"{channel}.{event.TYPE}.v{event.VERSION}"
            messages[message] = _event_message(event, schema, key, webhook=webhook)
            channels[channel]["messages"][event.TYPE] = {"$ref": f"#/components/messages/{message}"}
    operations["deliverWebhooks"] = {
        "action": "send",
        "channel": {"$ref": "#/channels/webhooks"},
        "summary": "Each event is POSTed to every endpoint subscribed to its type.",
        "bindings": {"http": {"method": "POST", "bindingVersion": "0.3.0"}},
        "messages": [
            {"$ref": f"#/channels/webhooks/messages/{name}"}
            for name in channels["webhooks"]["messages"]
        ],
    }
    operations["appendEvents"] = {
        "action": "send",
        "channel": {"$ref": "#/channels/events"},
        "summary": "Each event is appended to the stream once it is committed.",
        "messages": [
            {"$ref": f"#/channels/events/messages/{name}"}
            for name in channels["events"]["messages"]
        ],
    }

    for name in shared:
        if name in schemas:
            raise ValueError(f"a definition and a message schema are both named {name!r}")
    return {
        "asyncapi": "3.0.0",
        "id": "urn:billing-worker",
        "info": {
            "title": "billing-worker",
            "version": "1",
            "description": "The messages billing-worker receives (commands, as Celery tasks "
            "on Redis queues) and sends (events, to webhook endpoints and onto a Redis "
            "stream). Each payload's JSON Schema is also a file of the repository: "
            "`schemas/commands/<task>.v<version>.json`, `schemas/events/<type>.v<version>"
            ".json`. The HTTP API is described apart, at `/openapi.json`.",
        },
        "defaultContentType": "application/json",
        "servers": {
            "redis": {
                "host": "127.0.0.1:6379",
                "pathname": "/0",
                "protocol": "redis",
                "title": "Redis",
                "description": "The broker of the command queues, and the event stream: "
                "`BILLING_REDIS_URL` (`billing-worker up` runs its own and records its URL in "
                "`<data_dir>/stack.json`).",
                "security": [{"$ref": "#/components/securitySchemes/redisPassword"}],
            },
            "webhookEndpoint": {
                "host": "{host}",
                "protocol": "https",
                "title": "A webhook endpoint",
                "description": "The URL registered for an endpoint (`https`, or `http` "
                "where so registered); every endpoint is one.",
                "variables": {"host": {"description": "The endpoint's host (and port)."}},
            },
        },
        "channels": channels,
        "operations": operations,
        "components": {
            "schemas": {**schemas, **shared},
            "messages": messages,
            "securitySchemes": {
                "redisPassword": {
                    "type": "userPassword",
                    "description": "Redis `AUTH` with the server's password: whoever can "
                    "publish there is trusted.",
                }
            },
        },
    }
