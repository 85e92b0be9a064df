"""Failed and rejected commands are counted as they change (triggers on ``commands``,
``adapters/db/status_counts.py``): on each database, after every step of a command's life
through the real command log (accepted, failed, rejected, replayed, succeeded, pruned, and a
delete no code of ours makes), the kept counts equal a count of the log, and beat's gauges
read them."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import func, select, text

from adapters.db.engine import session_factory
from adapters.db.gauges import SqlSystemFigures
from adapters.db.models import CommandRow, CommandStatusCountRow
from application.handlers.operations.retention import prune_command_log
from application.requests.sweeps import PruneCommandLog
from domain.messages import CommandStatus
from tests.support.fakes.clock import FakeClock
from worker.bootstrap import build_services
from worker.settings import Settings

ENABLE = "users.enable"
DOWN = {"code": 14, "message": "down", "details": []}
GONE = {"code": 5, "message": "gone", "details": []}


def test_the_kept_counts_of_failed_and_rejected_commands_follow_every_change_of_the_log(
    make_database: Callable[[str], str],
) -> None:
    url = make_database(f"counts_{uuid.uuid4().hex[:8]}")
    sessions = session_factory(url)
    clock = FakeClock()
    app = build_services(Settings(database_url=url), sessions=sessions, clock=clock)
    log = app.commands

    def kept_and_counted() -> tuple[dict[str, int], dict[str, int]]:
        with sessions() as session:
            kept = {
                status: count
                for status, count in session.execute(
                    select(CommandStatusCountRow.status, CommandStatusCountRow.count)
                ).tuples()
                if count
            }
            counted = dict(
                session.execute(
                    select(CommandRow.status, func.count())
                    .where(CommandRow.status.in_(["failed", "rejected"]))
                    .group_by(CommandRow.status)
                )
                .tuples()
                .all()
            )
        return kept, counted

    def new(status: CommandStatus) -> str:
        command_id = f"cmd_{uuid.uuid4().hex[:12]}"
        payload = {"user_id": command_id}
        log.accept(
            command_id=command_id,
            command_type=ENABLE,
            payload=payload,
            client_id="cli_1",
            idempotency_key=None,
            request_fingerprint="f",
        )
        log.begin(command_id, ENABLE, payload, source="api")
        if status is CommandStatus.FAILED:
            log.fail(command_id, DOWN)
        elif status is CommandStatus.REJECTED:
            log.reject(command_id, GONE)
        elif status is CommandStatus.SUCCEEDED:
            log.succeed(command_id, {})
        return command_id

    failed = [new(CommandStatus.FAILED) for _ in range(3)]
    rejected = [new(CommandStatus.REJECTED) for _ in range(2)]
    new(CommandStatus.SUCCEEDED)
    kept, counted = kept_and_counted()
    assert kept == counted == {"failed": 3, "rejected": 2}

    log.requeue(failed[0])  # an operator's replay: queued again, no longer failed
    kept, counted = kept_and_counted()
    assert kept == counted == {"failed": 2, "rejected": 2}

    log.begin(failed[0], ENABLE, {"user_id": failed[0]}, source="api")
    log.fail(failed[0], DOWN)  # failed again
    kept, counted = kept_and_counted()
    assert kept == counted == {"failed": 3, "rejected": 2}

    with sessions() as session:  # a delete no code of ours makes (an operator's SQL)
        session.execute(text("DELETE FROM commands WHERE id = :id"), {"id": rejected[0]})
        session.commit()
    kept, counted = kept_and_counted()
    assert kept == counted == {"failed": 3, "rejected": 1}

    clock.advance(timedelta(days=91))  # past every retention: the sweep deletes them all
    prune_command_log(PruneCommandLog(until_done=True), app)
    kept, counted = kept_and_counted()
    assert kept == counted == {}

    new(CommandStatus.FAILED)
    figures = SqlSystemFigures(sessions, timedelta(hours=1))(clock.now())
    assert (figures.failed_commands, figures.rejected_commands) == (1, 0)
