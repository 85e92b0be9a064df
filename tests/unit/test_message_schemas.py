"""The JSON Schemas under ``schemas/`` are the models' (``adapters.contracts.schemas``): up to
date, one per command and per event type, and they accept and refuse what the models do."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from adapters.contracts.schemas import (
    COMMAND_TYPES,
    REFRESH,
    SCHEMAS_DIR,
    command_file,
    event_file,
    main,
    stale_files,
)
from domain.billing.account_commands import CreateBillingAccount
from domain.events.base import Event, Subject
from domain.events.catalog import EVENT_TYPES
from domain.events.commands import CommandFailedEvent
from domain.events.users import UserEnabledEvent
from domain.messages import Command
from domain.subscriptions.change_commands import ChangeSubscriptionPlan
from domain.users import EnableUser
from tasks.base import CommandTask
from worker.celery_app import app as celery_app

NOW = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)


def schema_of(relative_path: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS_DIR / relative_path).read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def problems(validator: Draft202012Validator, document: Any) -> list[str]:
    return sorted(
        f"{error.json_path}: {error.validator}" for error in validator.iter_errors(document)
    )


def all_subclasses(cls: type[Command]) -> set[type[Command]]:
    found: set[type[Command]] = set()
    for sub in cls.__subclasses__():
        found |= {sub, *all_subclasses(sub)}
    return found


# --- the files ---------------------------------------------------------------------------------


def test_the_schema_files_and_the_asyncapi_document_are_up_to_date() -> None:
    stale = stale_files()

    assert stale == [], "\n".join([*stale, f"refresh them with: {REFRESH}"])


def test_a_changed_missing_or_orphaned_file_is_named(tmp_path: Path) -> None:
    copy = tmp_path / "schemas"
    shutil.copytree(SCHEMAS_DIR, copy)
    (copy / "commands/users.enable.v1.json").write_text("{}\n")
    (copy / "asyncapi.json").unlink()
    (copy / "events/user.renamed.v1.json").write_text("{}\n")

    assert stale_files(copy) == [
        f"{copy}/asyncapi.json is missing",
        f"{copy}/commands/users.enable.v1.json is out of date",
        f"{copy}/events/user.renamed.v1.json is orphaned: no message has this schema",
    ]


def test_the_check_exits_1_naming_the_refresh_command_and_writing_fixes_every_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "schemas"
    shutil.copytree(SCHEMAS_DIR, copy)
    (copy / "events/user.enabled.v1.json").write_text("{}\n")
    (copy / "events/user.renamed.v1.json").write_text("{}\n")

    assert main(["--check", "--dir", str(copy)]) == 1
    assert f"run: {REFRESH}" in capsys.readouterr().err
    assert main(["--dir", str(copy)]) == 0
    assert stale_files(copy) == []
    assert not (copy / "events/user.renamed.v1.json").exists()
    assert main(["--check", "--dir", str(copy)]) == 0


def test_every_command_task_and_every_event_type_has_its_file_and_no_file_is_orphaned() -> None:
    celery_app.loader.import_default_modules()
    command_tasks = {
        name for name, task in celery_app.tasks.items() if isinstance(task, CommandTask)
    }
    files = {
        path.relative_to(SCHEMAS_DIR).as_posix()
        for directory in ("commands", "events")
        for path in (SCHEMAS_DIR / directory).iterdir()
    }

    assert {command.TASK_NAME for command in COMMAND_TYPES} == command_tasks
    assert set(COMMAND_TYPES) == all_subclasses(Command)
    assert files == {command_file(command) for command in COMMAND_TYPES} | {
        event_file(event) for event in EVENT_TYPES.values()
    }


@pytest.mark.parametrize(
    "relative_path",
    sorted(
        [command_file(command) for command in COMMAND_TYPES]
        + [event_file(event) for event in EVENT_TYPES.values()]
    ),
)
def test_each_schema_is_a_draft_2020_12_schema_with_an_id_a_title_and_a_description(
    relative_path: str,
) -> None:
    schema = json.loads((SCHEMAS_DIR / relative_path).read_text())

    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].startswith("urn:billing-worker:")
    assert schema["title"]
    assert schema["description"]


# --- commands ----------------------------------------------------------------------------------

ACCOUNT = {
    "name": "Acme",
    "email": "billing@acme.example",
    "address": {"line1": "1 Main St", "city": "Springfield", "country": "US"},
    "tax_data": [{"type": "us_ein", "id": "12-3456789"}],
    "metadata": {"plan": "gold"},
}
PUBLISHED: dict[type[Command], dict[str, Any]] = {
    EnableUser: {"user_id": "usr_1"},
    CreateBillingAccount: {"org_id": "org_1", "account": ACCOUNT},
    ChangeSubscriptionPlan: {
        "org_id": "org_1",
        "billing_account_id": "ba_1",
        "subscription_id": "sub_1",
        "plan": "gold",
    },
}


@pytest.mark.parametrize("command", list(PUBLISHED), ids=lambda command: command.TASK_NAME)
def test_a_command_published_without_command_id_and_as_the_api_records_it_validates(
    command: type[Command],
) -> None:
    validator = schema_of(command_file(command))
    recorded = command.model_validate({**PUBLISHED[command], "command_id": "c1"})

    assert problems(validator, PUBLISHED[command]) == []
    assert problems(validator, recorded.model_dump(mode="json")) == []


def test_what_the_schema_lets_a_publisher_omit_the_model_fills_in() -> None:
    command = CreateBillingAccount.model_validate(
        {**PUBLISHED[CreateBillingAccount], "command_id": "c1"}
    )

    assert command.billing_account_id.startswith("ba_")
    assert CreateBillingAccount.OMITTABLE - {"command_id"} == {"billing_account_id"}


PLAN_CHANGE = PUBLISHED[ChangeSubscriptionPlan]


@pytest.mark.parametrize(
    ("command", "message", "expected"),
    [
        (EnableUser, {"user": "usr_1"}, ["$: additionalProperties", "$: required"]),
        (EnableUser, {"user_id": "usr_1", "version": 2}, ["$.version: const"]),
        (EnableUser, {"user_id": "usr_1", "command_id": "a b"}, ["$.command_id: pattern"]),
        (
            CreateBillingAccount,
            {**PUBLISHED[CreateBillingAccount], "offline": "true"},
            ["$.offline: type"],
        ),
        (
            CreateBillingAccount,
            {"org_id": "org_1", "account": {**ACCOUNT, "address": {"line1": "x" * 201}}},
            ["$.account.address.line1: maxLength"],
        ),
        (
            ChangeSubscriptionPlan,
            {**PLAN_CHANGE, "cancel_upcoming_changes": True},
            ["$.plan: type"],
        ),
        (ChangeSubscriptionPlan, {**PLAN_CHANGE, "plan": None}, ["$.plan: type"]),
        (
            ChangeSubscriptionPlan,
            {**PLAN_CHANGE, "plan": None, "immediate": True, "cancel_upcoming_changes": True},
            ["$.immediate: const"],
        ),
    ],
)
def test_a_command_schema_refuses_what_the_worker_refuses_naming_the_path(
    command: type[Command], message: dict[str, Any], expected: list[str]
) -> None:
    assert problems(schema_of(command_file(command)), message) == expected
    with pytest.raises(ValidationError):
        command.model_validate({"command_id": "c1", **message})


# --- events ------------------------------------------------------------------------------------


def sample_events() -> list[Event]:
    plan_change = {
        "change_id": "chg_1",
        "subscription_id": "sub_1",
        "from_plan_id": "plan_a",
        "target_plan_id": "plan_b",
        "kind": "end_of_period",
        "state": "applied",
        "effective_at": NOW.isoformat(),
        "applied_at": NOW.isoformat(),
    }
    account = {
        "billing_account_id": "ba_1",
        "org_id": "org_1",
        "state": "active",
        "offline": False,
        "currency": "usd",
        "provider": "stripe",
        "provider_customer_id": "cus_1",
    }
    data: dict[str, dict[str, Any]] = {
        "billing_account.created": account,
        "billing_account.registered": account,
        "billing_account.registration_failed": {**account, "error": {"code": 3}},
        "billing_account.customer_deleted": account,
        "billing_account.registration_retried": account,
        "billing_account.marked_offline": account,
        "subscription.synced": {
            "subscription_id": "sub_1",
            "changes": {"state": ["active", "past_due"]},
            "source": "webhook",
            "provider_event_id": "evt_1",
        },
        "user.enabled": {"user_id": "usr_1", "state": "enabled"},
        "command.failed": {"command_id": "c1", "command_type": "users.enable", "error": {}},
        "command.retry_requested": {
            "command_id": "c1",
            "command_type": "users.enable",
            "status": "retrying",
        },
        "command.rejected": {"command_id": "c1", "command_type": "users.enable", "error": {}},
        "operator.action_taken": {
            "action": "mark-offline",
            "operator": "ann",
            "surface": "cli",
            "reason": "registered by hand",
            "targets": ["billing_account:ba_1"],
            "billing_account_id": "ba_1",
            "changes": ["billing_account.marked_offline billing_account:ba_1"],
        },
    }
    events: list[Event] = []
    for name, kind in EVENT_TYPES.items():
        events.append(
            kind.model_validate(
                {
                    "occurred_at": NOW,
                    "command_id": "c1",
                    "subject": Subject(type="subscription", id="sub_1"),
                    "data": data.get(name, plan_change),
                }
            )
        )
    assert {type(event) for event in events} >= {CommandFailedEvent, UserEnabledEvent}
    return events


@pytest.mark.parametrize("event", sample_events(), ids=lambda event: event.TYPE)
def test_an_event_as_it_is_written_validates_with_formats_checked(event: Event) -> None:
    document = event.model_dump(mode="json")

    assert problems(schema_of(event_file(type(event))), document) == []


def test_an_event_schema_accepts_new_fields_but_not_another_version_type_or_a_bad_time() -> None:
    event = sample_events()[0]
    validator = schema_of(event_file(type(event)))
    document = event.model_dump(mode="json")

    assert problems(validator, {**document, "new": 1, "data": {**document["data"], "x": 2}}) == []
    assert problems(validator, {**document, "version": 2}) == ["$.version: const"]
    assert problems(validator, {**document, "type": "user.enabled"}) == ["$.type: const"]
    assert problems(validator, {**document, "occurred_at": "yesterday"}) == [
        "$.occurred_at: format"
    ]
    assert problems(validator, {**document, "id": None}) == ["$.id: type"]
