"""The JSON Schema of every message in and out, and the AsyncAPI document that names them.

The files under ``schemas/`` are generated from the pydantic models, never edited by hand::

    python -m adapters.contracts.schemas           # rewrite what changed, remove orphans
    python -m adapters.contracts.schemas --check   # exit 1 naming each stale file

- ``schemas/commands/<task name>.v<version>.json``: a command's keyword arguments as a
  publisher sends them (``domain.messages.Command``);
- ``schemas/events/<type>.v<version>.json``: an event's JSON document as the webhooks, the
  Redis stream and the ``events`` table carry it (``domain.events.catalog``);
- ``schemas/asyncapi.json``: the AsyncAPI 3.0.0 document of the queues, the webhooks and the
  stream (``adapters.contracts.asyncapi``), also served at ``GET /asyncapi.json``.

Schemas are JSON Schema draft 2020-12. A command's schema refuses unknown fields (as the
worker does); an event's allows them, as receivers must ignore fields they do not know and a
version may gain fields.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import core_schema

from adapters.contracts.asyncapi import asyncapi_document
from domain.billing.account_commands import CreateBillingAccount, RegisterBillingAccount
from domain.events.base import Event
from domain.events.catalog import EVENT_TYPES
from domain.messages import Command
from domain.provider.sync import SyncStripeObject
from domain.subscriptions.change_commands import (
    ApplyScheduledChange,
    ChangeSubscriptionPlan,
    FinishStagedWithdrawal,
)
from domain.subscriptions.change_previews import PreviewPlanChange
from domain.users import EnableUser

COMMAND_TYPES: tuple[type[Command], ...] = (
    EnableUser,
    CreateBillingAccount,
    RegisterBillingAccount,
    ChangeSubscriptionPlan,
    PreviewPlanChange,
    ApplyScheduledChange,
    FinishStagedWithdrawal,
    SyncStripeObject,
)
"""Every command a worker receives (a test holds this to the Celery app's command tasks)."""

DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMAS_DIR = Path(__file__).resolve().parents[2] / "schemas"
ASYNCAPI_FILE = "asyncapi.json"
REFRESH = "python -m adapters.contracts.schemas"
SUBDIRECTORIES = ("commands", "events")


def command_version(command: type[Command]) -> int:
    return int(command.model_fields["version"].default)


def command_file(command: type[Command]) -> str:
    """Its schema's path under ``schemas/``."""
    return f"commands/{command.TASK_NAME}.v{command_version(command)}.json"


def event_file(event: type[Event]) -> str:
    return f"events/{event.TYPE}.v{event.VERSION}.json"


def command_schema_id(command: type[Command]) -> str:
    # A name, not a location: the schema is found by its file name, or in the AsyncAPI
    # document, wherever either is served from.
    return f"urn:billing-worker:command:{command.TASK_NAME}:v{command_version(command)}"


def event_schema_id(event: type[Event]) -> str:
    return f"urn:billing-worker:event:{event.TYPE}:v{event.VERSION}"


class _AsSerialized(GenerateJsonSchema):
    """``model_dump`` writes every field, defaulted or not: a receiver may count on each."""

    def field_is_required(
        self,
        field: core_schema.ModelField | core_schema.DataclassField | core_schema.TypedDictField,
        total: bool,
    ) -> bool:
        return True


_PLACED = ("title", "description", "$defs")


def _document(raw: dict[str, Any], schema_id: str, title: str, description: str) -> dict[str, Any]:
    body = {
        key: value for key, value in raw.items() if key not in ("title", "description", "$defs")
    }
    document: dict[str, Any] = {
        "$schema": DIALECT,
        "$id": schema_id,
        "title": title,
        "description": description,
        **body,
    }
    if "$defs" in raw:
        document["$defs"] = raw["$defs"]
    return document


def command_schema(command: type[Command]) -> dict[str, Any]:
    """The keyword arguments of ``command``'s task as published (validation mode: what the
    worker accepts), without requiring what the worker fills in (``Command.OMITTABLE``)."""
    raw = command.model_json_schema(mode="validation")
    raw["required"] = [name for name in raw.get("required", []) if name not in command.OMITTABLE]
    version = command_version(command)
    description = (
        f"{raw.get('description', '').strip()}\n\n"
        f"The keyword arguments of the Celery task `{command.TASK_NAME}` (queue "
        f"`{command.QUEUE}`), contract version {version}. Unknown fields are refused; "
        f"`command_id` defaults to the task id."
    ).strip()
    return _document(
        raw, command_schema_id(command), f"{command.TASK_NAME} v{version}", description
    )


def _open(schema: Any) -> Any:
    """``schema`` without its ``additionalProperties: false``, at every depth."""
    if isinstance(schema, dict):
        return {
            key: _open(value)
            for key, value in schema.items()
            if not (key == "additionalProperties" and value is False)
        }
    if isinstance(schema, list):
        return [_open(item) for item in schema]
    return schema


def event_schema(event: type[Event]) -> dict[str, Any]:
    """``event``'s document as ``model_dump(mode="json")`` writes it, open to new fields."""
    raw: dict[str, Any] = _open(
        event.model_json_schema(mode="serialization", schema_generator=_AsSerialized)
    )
    # The file is this version's: a document of another version does not match it.
    raw["properties"]["version"] = {"const": event.VERSION, "title": "Version", "type": "integer"}
    description = (
        f"{raw.get('description', '').strip()}\n\n"
        f"The event `{event.TYPE}`, version {event.VERSION}: the body of a webhook delivery, "
        "the `event` field of a stream entry, the `document` of an `events` row. Receivers "
        "ignore fields they do not know: a version gains fields, never loses or retypes one."
    ).strip()
    return _document(raw, event_schema_id(event), f"{event.TYPE} v{event.VERSION}", description)


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


@cache
def generated_files() -> dict[str, str]:
    """Every file of ``schemas/`` by its path there, as the models make it now."""
    commands = {command: command_schema(command) for command in COMMAND_TYPES}
    events = {event: event_schema(event) for event in EVENT_TYPES.values()}
    files = {command_file(command): render(schema) for command, schema in commands.items()}
    files.update({event_file(event): render(schema) for event, schema in events.items()})
    files[ASYNCAPI_FILE] = render(asyncapi_document(commands, events))
    return files


def asyncapi_json() -> str:
    """The AsyncAPI document, as ``schemas/asyncapi.json`` holds it."""
    return generated_files()[ASYNCAPI_FILE]


def _present(directory: Path) -> set[str]:
    return {
        path.relative_to(directory).as_posix()
        for subdirectory in SUBDIRECTORIES
        for path in (directory / subdirectory).glob("*.json")
    }


def stale_files(directory: Path = SCHEMAS_DIR) -> list[str]:
    """What differs between ``directory`` and the models, one line each: files out of date,
    missing, or orphaned (a schema of no current message)."""
    expected = generated_files()
    problems = []
    for name, text in sorted(expected.items()):
        path = directory / name
        if not path.is_file():
            problems.append(f"{path} is missing")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"{path} is out of date")
    problems.extend(
        f"{directory / name} is orphaned: no message has this schema"
        for name in sorted(_present(directory) - expected.keys())
    )
    return problems


def write(directory: Path = SCHEMAS_DIR) -> list[str]:
    """Bring ``directory`` up to date; returns what was written or removed."""
    changed = []
    for name, text in sorted(generated_files().items()):
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            changed.append(f"wrote {path}")
    for name in sorted(_present(directory) - generated_files().keys()):
        (directory / name).unlink()
        changed.append(f"removed {directory / name}")
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m adapters.contracts.schemas",
        description="Write the messages' JSON Schemas and the AsyncAPI document.",
    )
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    parser.add_argument("--dir", type=Path, default=SCHEMAS_DIR, help="default: %(default)s")
    options = parser.parse_args(argv)
    if options.check:
        problems = stale_files(options.dir)
        _print(problems, sys.stderr)
        if problems:
            print(f"run: {REFRESH}", file=sys.stderr)
            return 1
        return 0
    _print(write(options.dir), sys.stdout)
    return 0


def _print(lines: Iterable[str], stream: Any) -> None:
    for line in lines:
        print(line, file=stream)


if __name__ == "__main__":
    sys.exit(main())
