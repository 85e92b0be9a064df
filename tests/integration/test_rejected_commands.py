"""Rejected is not failed, on the real command log (SQLite, PostgreSQL): the two lists, the
refused replay, the operator's command lines, beat's gauges, and migration 0013 moving the
callers' mistakes recorded as failed to rejected."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from alembic import command
from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from sqlalchemy import insert, select

from adapters.clock import SystemClock
from adapters.db.command_log import SqlCommandLog
from adapters.db.engine import get_engine, session_factory
from adapters.db.migrate import alembic_config, upgrade
from adapters.db.models import CommandRow
from domain.errors import (
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    Unavailable,
    error_info,
    field_violations,
)
from domain.messages import CommandStatus
from worker.bootstrap import build_services
from worker.settings import Settings

ENABLE = "users.enable"
CALLERS_MISTAKE = NotFound.resource("user", "usr_nobody").to_body()
OPERATORS_FAILURE = Unavailable(
    "gave up after 4 attempts: stripe create customer: 503 error: down",
    details=[error_info("RETRY_BUDGET_EXHAUSTED", attempts="4")],
).to_body()


def a_log(make_database: Callable[[str], str]) -> tuple[str, SqlCommandLog]:
    url = make_database(f"rejected_{uuid.uuid4().hex[:8]}")
    return url, SqlCommandLog(session_factory(url), SystemClock())


def ended(log: SqlCommandLog, status: CommandStatus, error: dict[str, Any]) -> str:
    """A command run to ``rejected`` or ``failed`` with ``error``; its id."""
    command_id = f"cmd_{uuid.uuid4().hex[:12]}"
    payload = {"command_id": command_id, "user_id": "usr_nobody"}
    log.begin(command_id, ENABLE, payload, source="queue")
    if status is CommandStatus.REJECTED:
        log.reject(command_id, error)
    else:
        log.fail(command_id, error)
    return command_id


def test_rejected_and_failed_commands_are_listed_apart(
    make_database: Callable[[str], str],
) -> None:
    _, log = a_log(make_database)
    rejected = [ended(log, CommandStatus.REJECTED, CALLERS_MISTAKE) for _ in range(3)]
    failed = ended(log, CommandStatus.FAILED, OPERATORS_FAILURE)

    assert [record.id for record in log.list_failed()] == [failed]
    assert sorted(record.id for record in log.list_rejected()) == sorted(rejected)
    assert log.list_rejected(limit=2)[0].status is CommandStatus.REJECTED


def test_replaying_a_rejected_command_is_refused_naming_why_and_leaves_it_as_it_was(
    make_database: Callable[[str], str],
) -> None:
    _, log = a_log(make_database)
    command_id = ended(log, CommandStatus.REJECTED, CALLERS_MISTAKE)
    before = log.get(command_id)

    with pytest.raises(FailedPrecondition) as refused:
        log.requeue(command_id)

    assert "was rejected (NOT_FOUND (5): user 'usr_nobody' not found)" in refused.value.message
    assert log.get(command_id) == before


def test_a_failed_command_is_still_replayed(make_database: Callable[[str], str]) -> None:
    _, log = a_log(make_database)
    command_id = ended(log, CommandStatus.FAILED, OPERATORS_FAILURE)

    record = log.requeue(command_id)

    assert record is not None
    assert (record.status, record.error) == (CommandStatus.QUEUED, None)


# --- the operator's command lines -------------------------------------------------------------


def billing_worker(*args: str, url: str, redis_url: str) -> subprocess.CompletedProcess[str]:
    """Run ``billing-worker ARGS`` as an operator would, on the database at ``url``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BILLING_")}
    return subprocess.run(
        [sys.executable, "-m", "worker.cli", *args],
        env={**clean, "BILLING_DATABASE_URL": url, "BILLING_REDIS_URL": redis_url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_operator_lists_failed_and_rejected_commands_apart_and_cannot_replay_a_rejection(
    make_database: Callable[[str], str], redis_server: str
) -> None:
    url, log = a_log(make_database)
    redis_url = f"{redis_server}/4"
    empty_failed = billing_worker("commands", "failed", url=url, redis_url=redis_url)
    empty_rejected = billing_worker("commands", "rejected", url=url, redis_url=redis_url)
    invalid = InvalidArgument(
        "the command message is invalid",
        details=[field_violations([("user_id", "String should match pattern")])],
    ).to_body()
    rejected = [
        ended(log, CommandStatus.REJECTED, CALLERS_MISTAKE),
        ended(log, CommandStatus.REJECTED, invalid),
    ]
    failed = ended(log, CommandStatus.FAILED, OPERATORS_FAILURE)

    failed_list = billing_worker("commands", "failed", url=url, redis_url=redis_url)
    rejected_list = billing_worker("commands", "rejected", url=url, redis_url=redis_url)
    replay = billing_worker(
        "commands", "replay", rejected[0], "--reason", "try", url=url, redis_url=redis_url
    )

    assert (empty_failed.returncode, empty_failed.stdout) == (0, "no failed commands\n")
    assert (empty_rejected.returncode, empty_rejected.stdout) == (0, "no rejected commands\n")
    header, *rows = failed_list.stdout.splitlines()
    assert header.split() == ["COMMAND", "TYPE", "FINISHED", "(UTC)", "REASON"]
    assert [row.split()[0] for row in rows] == [failed]
    assert "UNAVAILABLE (14) RETRY_BUDGET_EXHAUSTED: gave up after 4 attempts" in rows[0]
    header, *rows = rejected_list.stdout.splitlines()
    assert header.split()[0] == "COMMAND"
    assert sorted(row.split()[0] for row in rows) == sorted(rejected)
    assert any(
        "INVALID_ARGUMENT (3): the command message is invalid; user_id: String should" in row
        for row in rows
    )
    assert replay.returncode == 1
    assert "Traceback" not in replay.stderr
    [line] = replay.stderr.splitlines()
    assert line.startswith(f"Error: command {rejected[0]} was rejected (NOT_FOUND (5): ")
    assert replay.stdout == ""
    record = log.get(rejected[0])
    assert record is not None
    assert record.status is CommandStatus.REJECTED


# --- beat's gauges ----------------------------------------------------------------------------


def gauges(collector: Collector) -> dict[str, float]:
    families: list[Metric] = list(collector.collect())
    return {
        sample.name: sample.value
        for family in families
        for sample in family.samples
        if not sample.labels
    }


def test_beat_counts_failed_commands_for_the_alert_and_rejected_ones_apart(
    make_database: Callable[[str], str], redis_server: str
) -> None:
    url, log = a_log(make_database)
    collector = build_services(
        Settings(database_url=url, redis_url=f"{redis_server}/4")
    ).system_collector()
    for _ in range(20):
        ended(log, CommandStatus.REJECTED, CALLERS_MISTAKE)
    ended(log, CommandStatus.FAILED, OPERATORS_FAILURE)

    read = gauges(collector)

    assert (read["billing_failed_commands"], read["billing_rejected_commands"]) == (1, 20)


# --- migration 0013 ---------------------------------------------------------------------------

RECORDED_BEFORE_0013: dict[str, dict[str, Any] | None] = {
    "not-found": CALLERS_MISTAKE,
    "invalid": InvalidArgument.for_fields("the request is invalid", [("user_id", "bad")]).to_body(),
    "provider-refused-the-callers-data": InvalidArgument(
        "the billing provider rejected the request: Invalid email",
        details=[error_info("PROVIDER_REJECTED", status="400")],
    ).to_body(),
    "retries-exhausted": OPERATORS_FAILURE,
    "our-bug": Internal("internal error").to_body(),
    "provider-not-configured": FailedPrecondition(
        "no billing provider is configured",
        details=[error_info("PROVIDER_NOT_CONFIGURED")],
    ).to_body(),
    "no-error": None,
    "unreadable-error": {"code": "five"},
}
BECOMES = {
    "not-found": "rejected",
    "invalid": "rejected",
    "provider-refused-the-callers-data": "rejected",
    "retries-exhausted": "failed",
    "our-bug": "failed",
    "provider-not-configured": "failed",
    "no-error": "failed",
    "unreadable-error": "failed",
}


def a_row(command_id: str, status: str, error: dict[str, Any] | None) -> dict[str, Any]:
    now = SystemClock().now()
    return {
        "id": command_id,
        "type": ENABLE,
        "status": status,
        "source": "api",
        "payload": {"user_id": "usr_nobody"},
        "attempts": 1,
        "error": error,
        "created_at": now - timedelta(days=3),
        "updated_at": now - timedelta(days=3),
        "finished_at": now - timedelta(days=3),
    }


def statuses(url: str) -> dict[str, str]:
    with session_factory(url)() as session:
        return {
            row.id: row.status for row in session.execute(select(CommandRow.id, CommandRow.status))
        }


def test_migration_0013_makes_the_callers_mistakes_recorded_as_failed_rejected(
    make_database: Callable[[str], str],
) -> None:
    url = make_database(f"migration_0013_{uuid.uuid4().hex[:8]}")
    command.downgrade(alembic_config(url), "0012")
    # More callers' mistakes than one batch of the migration (1000), and rows it leaves be.
    many = [f"many-{number:04d}" for number in range(1005)]
    rows = [a_row(name, "failed", error) for name, error in RECORDED_BEFORE_0013.items()]
    rows += [a_row(name, "failed", CALLERS_MISTAKE) for name in many]
    rows += [a_row("succeeded", "succeeded", None), a_row("queued", "queued", None)]
    with get_engine(url).begin() as connection:
        connection.execute(insert(CommandRow), rows)

    upgrade(url)
    after = statuses(url)

    assert {name: after[name] for name in BECOMES} == BECOMES
    assert {after[name] for name in many} == {"rejected"}
    assert (after["succeeded"], after["queued"]) == ("succeeded", "queued")
    log = SqlCommandLog(session_factory(url), SystemClock())
    finished = log.begin("not-found", ENABLE, {"user_id": "usr_nobody"}, source="queue")
    assert finished is not None
    assert (finished.status, finished.error) == (CommandStatus.REJECTED, CALLERS_MISTAKE)


def test_migration_0013_downgraded_makes_every_rejected_command_failed_again(
    make_database: Callable[[str], str],
) -> None:
    url = make_database(f"migration_0013_{uuid.uuid4().hex[:8]}")
    log = SqlCommandLog(session_factory(url), SystemClock())
    rejected = ended(log, CommandStatus.REJECTED, CALLERS_MISTAKE)
    failed = ended(log, CommandStatus.FAILED, OPERATORS_FAILURE)

    command.downgrade(alembic_config(url), "0012")
    downgraded = statuses(url)
    upgrade(url)

    assert (downgraded[rejected], downgraded[failed]) == ("failed", "failed")
    assert (statuses(url)[rejected], statuses(url)[failed]) == ("rejected", "failed")
