"""Personal data stays where it belongs: whole in the command log and the API's answers,
masked in the result backend, and absent from every log line, which is JSON naming its
command; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from adapters.clock import SystemClock
from tests.support.records import create_organization
from tests.support.stack import Stack, eventually, stack_env
from worker.launch.command_lines import celery_beat_argv
from worker.local.embedded import ProcessGroup

pytestmark = pytest.mark.e2e

PHONE = "+442079460958"
CREATE = "billing.create_account"


def personal_details(tag: str) -> dict[str, Any]:
    return {
        "name": f"Ada {tag} Ltd",
        "email": f"ada.{tag}@acme.example",
        "phone": PHONE,
        "address": {"line1": f"{tag} Baker Street", "postal_code": "NW1 6XE", "country": "GB"},
        "tax_data": [{"type": "vat", "id": "GB123456789"}],
    }


@dataclass(frozen=True)
class Created:
    """A billing account created with personal data, and how."""

    command_id: str
    task_id: str
    email: str
    how: str


def new_org(stack: Stack) -> str:
    name = f"org-{uuid.uuid4().hex[:10]}"
    return create_organization(stack.sessions, SystemClock(), name=name).id


@pytest.fixture
def over_http(stack: Stack) -> Created:
    tag = uuid.uuid4().hex[:8]
    with stack.http() as api:
        response = api.post(
            f"/v1beta1/organizations/{new_org(stack)}/billing",
            json={"body": personal_details(tag), "offline": False},
        )
    assert response.status_code == 200, response.text
    # The API answers with the whole account, read from the command log.
    assert response.json()["billing_account"]["email"] == f"ada.{tag}@acme.example"
    command_id = response.headers["Command-Id"]
    return Created(command_id, command_id, f"ada.{tag}@acme.example", "http")


@pytest.fixture
def on_the_queue(stack: Stack, publisher: Celery) -> Created:
    tag = uuid.uuid4().hex[:8]
    command_id, task_id = f"queue-{tag}", str(uuid.uuid4())
    publisher.send_task(
        CREATE,
        queue="billing",
        task_id=task_id,
        kwargs={
            "command_id": command_id,
            "org_id": new_org(stack),
            "account": personal_details(tag),
        },
    )
    record = stack.finished(command_id)
    assert record.status.value == "succeeded", record.error
    assert record.result is not None
    assert record.result["billing_account"]["email"] == f"ada.{tag}@acme.example"
    return Created(command_id, task_id, f"ada.{tag}@acme.example", "queue")


@pytest.fixture(params=["http", "queue"])
def created(request: pytest.FixtureRequest) -> Created:
    made: Created = request.getfixturevalue(
        "over_http" if request.param == "http" else "on_the_queue"
    )
    return made


def stored_result(stack: Stack, task_id: str) -> bytes:
    backend = redis.Redis.from_url(stack.redis_url)

    def stored() -> bytes | None:
        # The task's outcome is stored once the task returned, after its command was
        # recorded.
        raw = backend.get(f"celery-task-meta-{task_id}")
        if not isinstance(raw, bytes) or json.loads(raw).get("status") != "SUCCESS":
            return None
        return raw

    return eventually(stored, 15, "the stored outcome")


def test_the_result_backend_keeps_the_result_masked_and_no_arguments(
    stack: Stack, created: Created
) -> None:
    raw = stored_result(stack, created.task_id)

    assert created.email.encode() not in raw
    assert PHONE.encode() not in raw
    meta = json.loads(raw)
    account = meta["result"]["billing_account"]
    assert account["email"] == "a***@acme.example"
    assert account["phone"] == "+44*******958"
    assert account["name"] == "A***"
    assert account["address"]["postal_code"] == "N***"
    assert account["address"]["country"] == "GB"
    assert account["tax_data"] == [{"type": "gb_vat", "id": "GB*******89"}]
    assert "kwargs" not in meta


def test_the_command_log_keeps_the_whole_result(stack: Stack, created: Created) -> None:
    with stack.http() as api:
        shown = api.get(f"/v1beta1/commands/{created.command_id}")

    if created.how == "http":  # a client sees its own commands only
        assert shown.json()["result"]["billing_account"]["email"] == created.email
    assert stack.command(created.command_id).payload["account"]["email"] == created.email


def json_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a log file, each parsed as JSON (the test fails on one that is not)."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            whole = path.read_text()[-4000:]
            pytest.fail(f"{path.name}: not a JSON line: {line[:200]!r} in\n{whole}")
    return parsed


def process_logs(stack: Stack) -> list[Path]:
    return [stack.workdir / "api.log", *sorted(stack.workdir.glob("worker-*.log"))]


def test_every_log_line_of_the_api_and_the_workers_is_a_json_object(
    stack: Stack, created: Created
) -> None:
    for path in process_logs(stack):
        for line in json_lines(path):
            assert {"time", "level", "logger", "message"} <= set(line), line


def test_every_line_about_a_command_carries_its_id_task_and_attempt(
    stack: Stack, created: Created
) -> None:
    def about_the_command() -> list[dict[str, Any]]:
        lines = json_lines(stack.workdir / "worker-w1.log")
        return [
            line
            for line in lines
            if created.task_id in line["message"] or created.command_id in line["message"]
        ]

    def done() -> list[dict[str, Any]] | None:
        lines = about_the_command()
        return lines if any("succeeded" in line["message"] for line in lines) else None

    # At INFO a command has one line of Celery's, its outcome ("received" is a DEBUG line).
    lines = eventually(done, 15, "the command's outcome line")

    for line in lines:
        assert line["command_id"] == created.command_id, line
        assert line["task"] == CREATE, line
        assert line["task_id"] == created.task_id, line
        assert line["attempt"] == 1, line
        assert line["org_id"].startswith("org_"), line


def test_no_email_or_phone_of_a_request_is_in_any_log(stack: Stack, created: Created) -> None:
    stored_result(stack, created.task_id)  # the worker is done with it

    for path in process_logs(stack):
        text = path.read_text()
        assert created.email not in text, path.name
        assert PHONE not in text, path.name
        assert created.email.split("@")[0] not in text, path.name
        assert "Baker Street" not in text, path.name


def test_beat_writes_json_lines(stack: Stack, tmp_path: Path) -> None:
    # A beat of its own, on a Redis database no worker reads: its sweeps go nowhere.
    env = stack_env(
        database_url=stack.database_url,
        redis_url=stack.redis_url.rsplit("/", 1)[0] + "/9",
        data_dir=tmp_path,
    )
    group = ProcessGroup()
    log = tmp_path / "beat.log"
    group.start("beat", celery_beat_argv(tmp_path / "schedule"), env=env, log_path=log)
    try:
        eventually(lambda: "Sending due task" in log.read_text(), 30, "beat to send a task")
    finally:
        group.stop()

    lines = json_lines(log)
    assert any("Sending due task" in line["message"] for line in lines)
    assert all(line["logger"] for line in lines)
