"""The API's record whose commit answer was lost (``outbox.publish_if_recorded_unheard``): a
command recorded without the API hearing so is published once the log answers, not left
``queued`` for the stalled-command sweep. Proven on real parts by the PostgreSQL switchover
tests (tests/chaos/test_postgres_switchover.py)."""

from __future__ import annotations

from application.handlers.operations.outbox import publish_if_recorded_unheard
from domain.messages import CommandStatus
from tests.support.fakes.application import FakeApplication
from tests.support.fakes.database import DatabaseUnavailable
from tests.support.fakes.journal import JournalEntry

ENABLE = "users.enable"


def test_a_command_recorded_unheard_is_published_once_the_log_answers() -> None:
    app = FakeApplication()
    app.commands.accept("c1", ENABLE, {"command_id": "c1", "user_id": "usr_1"})
    answers = iter([DatabaseUnavailable("no primary yet"), None])

    def find(command_id: str) -> JournalEntry | None:
        if (error := next(answers)) is not None:
            raise error
        return app.commands.get(command_id)

    published = publish_if_recorded_unheard(
        "c1",
        find,
        app.published,
        is_transient=app.is_transient,
    )

    assert published
    [message] = app.published.published
    assert (message.command_id, message.task_name) == ("c1", ENABLE)


def test_a_command_that_was_not_recorded_is_left_to_the_clients_retry() -> None:
    app = FakeApplication()

    published = publish_if_recorded_unheard(
        "c1", app.commands.get, app.published, is_transient=app.is_transient
    )

    assert not published
    assert app.published.published == []


def test_a_command_a_worker_already_took_is_not_published_again() -> None:
    app = FakeApplication()
    app.commands.accept("c1", ENABLE, {"command_id": "c1", "user_id": "usr_1"})
    app.commands.begin("c1", ENABLE, {"command_id": "c1", "user_id": "usr_1"}, source="api")
    assert app.commands["c1"].status is CommandStatus.RUNNING

    published = publish_if_recorded_unheard(
        "c1", app.commands.get, app.published, is_transient=app.is_transient
    )

    assert not published
    assert app.published.published == []


def test_a_log_that_stays_unreachable_past_the_patience_leaves_it_to_the_sweep() -> None:
    app = FakeApplication()

    def find(command_id: str) -> None:
        raise DatabaseUnavailable("connection refused")

    published = publish_if_recorded_unheard(
        "c1", find, app.published, is_transient=app.is_transient, patience_seconds=0.3
    )

    assert not published
    assert app.published.published == []
