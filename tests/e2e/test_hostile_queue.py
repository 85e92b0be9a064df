"""Any bytes a broken publisher pushes onto our queues: the worker stays up, the next valid
command runs, and the message is a dead letter an operator can find. A command id means one
command, and every command is journalled, whatever its values."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import uuid

import pytest
import redis
from celery import Celery
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from adapters.clock import SystemClock
from adapters.db.models import BillingAccountRow
from tests.support.raw_messages import (
    POISON,
    REFUSED,
    b64,
    dead_letter_of,
    dead_letters,
    envelope,
    last_letter_id,
    push,
)
from tests.support.records import create_organization, create_user, user_state
from tests.support.stack import Stack, eventually

pytestmark = pytest.mark.e2e

TASK_QUEUES = ("users", "billing", "subscriptions", "maintenance")


def new_user(stack: Stack) -> str:
    user = create_user(
        stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io", disabled=True
    )
    return str(user.id)


def a_valid_command_succeeds(stack: Stack, publisher: Celery, queue: str = "users") -> None:
    user_id = new_user(stack)
    command_id = str(uuid.uuid4())
    publisher.send_task(
        "users.enable", kwargs={"command_id": command_id, "user_id": user_id}, queue=queue
    )
    assert stack.finished(command_id, timeout=30).status.value == "succeeded"
    assert user_state(stack.sessions, user_id) == "enabled"


def workers_alive(stack: Stack) -> bool:
    workers = [child for child in stack.group.children if child.name.startswith("worker-")]
    return bool(workers) and all(child.process.poll() is None for child in workers)


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_refused_message_becomes_a_dead_letter_and_the_next_command_runs(
    stack: Stack, publisher: Celery, case: str
) -> None:
    mark = last_letter_id(stack.redis_url)
    push(stack.redis_url, "users", REFUSED[case])

    letter = eventually(
        lambda: dead_letter_of(stack.redis_url, REFUSED[case], "users", mark),
        timeout=20,
        what=f"the {case} message dead-lettered",
    )
    assert letter.reason
    assert letter.size >= len(letter.raw)
    a_valid_command_succeeds(stack, publisher)
    assert workers_alive(stack)


@pytest.mark.parametrize("queue", TASK_QUEUES)
def test_the_four_poison_messages_on_any_queue_leave_the_worker_running(
    stack: Stack, publisher: Celery, queue: str
) -> None:
    mark = last_letter_id(stack.redis_url)
    for raw in POISON.values():
        push(stack.redis_url, queue, raw)

    for case, raw in POISON.items():
        eventually(
            functools.partial(dead_letter_of, stack.redis_url, raw, queue, mark),
            timeout=20,
            what=f"the {case} message on {queue} dead-lettered",
        )
    a_valid_command_succeeds(stack, publisher, queue)
    assert workers_alive(stack)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    raw=st.one_of(
        st.binary(max_size=300),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=20),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(st.text(max_size=8), inner, max_size=4)
            ),
            max_leaves=12,
        ).map(lambda value: json.dumps(value).encode()),
        st.binary(max_size=200).map(lambda body: envelope(body=b64(body))),
        st.text(max_size=50).map(lambda body: envelope(body=body)),
    )
)
def test_arbitrary_bytes_never_stop_the_worker(stack: Stack, publisher: Celery, raw: bytes) -> None:
    push(stack.redis_url, "users", raw)
    # Drained: the worker took it (as a dead letter, or as a command that failed validation).
    eventually(
        lambda: _queue_length(stack, "users") == 0, timeout=20, what="the users queue drained"
    )
    assert workers_alive(stack)


def test_after_arbitrary_bytes_a_valid_command_still_runs(stack: Stack, publisher: Celery) -> None:
    # Runs after the property test above (same module, in order).
    a_valid_command_succeeds(stack, publisher)
    assert workers_alive(stack)


def _queue_length(stack: Stack, queue: str) -> int:
    client = redis.Redis.from_url(stack.redis_url)
    try:
        return int(client.llen(queue))
    finally:
        client.close()


def test_a_command_published_without_a_queue_still_runs(stack: Stack, publisher: Celery) -> None:
    user_id = new_user(stack)
    command_id = str(uuid.uuid4())

    publisher.send_task("users.enable", kwargs={"command_id": command_id, "user_id": user_id})

    assert stack.finished(command_id, timeout=30).status.value == "succeeded"


def test_a_command_id_reused_for_another_command_is_refused_and_the_first_stands(
    stack: Stack, publisher: Celery
) -> None:
    user_id = new_user(stack)
    command_id = str(uuid.uuid4())
    publisher.send_task(
        "users.enable", kwargs={"command_id": command_id, "user_id": user_id}, queue="users"
    )
    first = stack.finished(command_id)
    org = create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex}")

    reuse = publisher.send_task(
        "billing.create_account",
        kwargs={
            "command_id": command_id,
            "org_id": org.id,
            "account": {"name": "Acme", "email": "billing@acme.example"},
            "offline": True,
        },
        queue="billing",
    )

    letter = eventually(
        lambda: next(
            (letter for letter in dead_letters(stack.redis_url) if letter.task_id == reuse.id),
            None,
        ),
        what="the reused command id refused",
    )
    assert letter.reason.startswith("COMMAND_ID_REUSED")
    assert stack.command(command_id) == first  # untouched
    with stack.sessions() as session:
        accounts = session.scalar(
            select(func.count())
            .select_from(BillingAccountRow)
            .where(BillingAccountRow.org_id == org.id)
        )
    assert accounts == 0


def test_a_command_id_reused_with_another_payload_of_the_same_task_is_refused(
    stack: Stack, publisher: Celery
) -> None:
    command_id = str(uuid.uuid4())
    first_user, second_user = new_user(stack), new_user(stack)
    publisher.send_task(
        "users.enable", kwargs={"command_id": command_id, "user_id": first_user}, queue="users"
    )
    stack.finished(command_id)

    reuse = publisher.send_task(
        "users.enable", kwargs={"command_id": command_id, "user_id": second_user}, queue="users"
    )

    eventually(
        lambda: any(letter.task_id == reuse.id for letter in dead_letters(stack.redis_url)),
        what="the reused command id refused",
    )
    assert user_state(stack.sessions, second_user) == "disabled"


@pytest.mark.parametrize(
    ("user_id", "why"),
    [
        ("usr_\x00nul", "NUL"),
        (float("nan"), "not a JSON number"),
        (float("inf"), "not a JSON number"),
    ],
    ids=["nul", "nan", "infinity"],
)
def test_a_command_with_values_no_database_keeps_is_journalled_as_rejected(
    stack: Stack, publisher: Celery, user_id: object, why: str
) -> None:
    command_id = str(uuid.uuid4())

    publisher.send_task(
        "users.enable", kwargs={"command_id": command_id, "user_id": user_id}, queue="users"
    )

    record = stack.finished(command_id, timeout=30)
    assert record.status.value == "rejected"
    assert record.error is not None
    assert record.error["code"] == 3
    [violation] = record.error["details"][0]["fieldViolations"]
    assert violation["field"] == "user_id"
    assert why in violation["description"]


def test_operators_list_show_and_drop_dead_letters_from_the_command_line(
    stack: Stack,
) -> None:
    raw = envelope(body="%%% not base64 %%%")
    mark = last_letter_id(stack.redis_url)
    push(stack.redis_url, "billing", raw)
    letter = eventually(
        lambda: dead_letter_of(stack.redis_url, raw, "billing", mark), what="a dead letter"
    )

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "worker.cli", *args],
            env={**os.environ, **stack.env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    listed = cli("dead-letters", "list")
    assert listed.returncode == 0, listed.stderr
    assert letter.id in listed.stdout
    assert "base64" in listed.stdout
    assert "dead letters" in cli("commands", "failed").stdout
    shown = cli("dead-letters", "show", letter.id)
    assert "not base64" in shown.stdout
    replayed = cli("dead-letters", "replay", letter.id, "--reason", "try")
    assert replayed.returncode == 1
    assert "still cannot be taken" in replayed.stderr
    assert "Traceback" not in replayed.stderr
    assert cli("dead-letters", "drop", letter.id).returncode == 0
    assert cli("dead-letters", "show", letter.id).returncode == 1


def test_a_dead_letter_of_a_task_no_worker_runs_is_not_replayed(stack: Stack) -> None:
    raw = envelope(task="reports.nightly", queue="billing")
    mark = last_letter_id(stack.redis_url)
    push(stack.redis_url, "billing", raw)
    letter = eventually(
        lambda: dead_letter_of(stack.redis_url, raw, "billing", mark), what="a dead letter"
    )

    replayed = subprocess.run(
        [
            sys.executable,
            "-m",
            "worker.cli",
            "dead-letters",
            "replay",
            letter.id,
            "--reason",
            "try",
        ],
        env={**os.environ, **stack.env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert replayed.returncode == 1
    assert replayed.stderr.splitlines() == [
        f"Error: dead letter {letter.id} is of task 'reports.nightly', which no worker runs: "
        "not replayed (drop it, or replay it once a worker runs that task)"
    ]
    assert dead_letter_of(stack.redis_url, raw, "billing", mark) == letter  # kept, not renamed
