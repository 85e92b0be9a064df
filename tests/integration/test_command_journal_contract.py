"""The command journal's contract (``domain.ports.commands.CommandJournal``), checked on the real
command log (SQLite, PostgreSQL) and on the fake the runner's unit tests use."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from adapters.db.command_log import SqlCommandLog
from adapters.db.command_runs import DEFAULT_RUNNING_LEASE
from adapters.db.engine import session_factory
from domain.errors import CommandIdReused, CommandInProgress
from domain.messages import CommandStatus
from domain.ports.commands import CommandJournal, retries_used
from tests.support.fakes.clock import FakeClock
from tests.support.fakes.journal import FakeCommandJournal

LEASE = timedelta(minutes=10)
ENABLE = "users.enable"


@dataclass
class Journal:
    port: CommandJournal
    clock: FakeClock
    wall_clock: FakeClock
    """The machine's time, which a run's age is measured on (the business clock may move)."""
    accept: Callable[[str, dict[str, Any]], None]
    """Record a command as the API does, before publishing it."""


@pytest.fixture(params=["real", "fake"])
def journal(
    request: pytest.FixtureRequest, backend: str, make_database: Callable[[str], str]
) -> Journal:
    clock, wall_clock = FakeClock(), FakeClock()
    if request.param == "fake":
        if backend != "sqlite":
            pytest.skip("the fake has no backends: it runs once")
        fake = FakeCommandJournal(clock, LEASE, wall_clock=wall_clock)

        def accept_fake(command_id: str, payload: dict[str, Any]) -> None:
            fake.accept(command_id, ENABLE, payload)

        return Journal(fake, clock, wall_clock, accept_fake)
    log = SqlCommandLog(
        session_factory(make_database(f"log_{uuid.uuid4().hex[:8]}")),
        clock,
        LEASE,
        wall_clock=wall_clock,
    )

    def accept(command_id: str, payload: dict[str, Any]) -> None:
        log.accept(
            command_id=command_id,
            command_type=ENABLE,
            payload=payload,
            client_id=None,
            idempotency_key=None,
            request_fingerprint=None,
        )

    return Journal(log, clock, wall_clock, accept)


def payload(command_id: str, user_id: str = "usr_1") -> dict[str, Any]:
    return {"command_id": command_id, "user_id": user_id}


def test_a_new_command_begins_and_its_outcome_is_returned_on_redelivery(
    journal: Journal,
) -> None:
    log = journal.port
    assert log.begin("c1", ENABLE, payload("c1"), source="queue") is None
    log.succeed("c1", {"ok": True})

    finished = log.begin("c1", ENABLE, payload("c1"), source="queue")

    assert finished is not None
    assert (finished.status, finished.result, finished.error) == (
        CommandStatus.SUCCEEDED,
        {"ok": True},
        None,
    )


def test_a_failed_command_returns_its_error_on_redelivery(journal: Journal) -> None:
    log = journal.port
    log.begin("c1", ENABLE, payload("c1"), source="queue")
    log.fail("c1", {"code": 5, "message": "gone", "details": []})

    finished = log.begin("c1", ENABLE, payload("c1"), source="queue")

    assert finished is not None
    assert (finished.status, finished.error) == (
        CommandStatus.FAILED,
        {"code": 5, "message": "gone", "details": []},
    )


def test_a_rejected_command_returns_its_error_on_redelivery(journal: Journal) -> None:
    log = journal.port
    log.begin("c1", ENABLE, payload("c1"), source="queue")
    log.reject("c1", {"code": 5, "message": "gone", "details": []})

    finished = log.begin("c1", ENABLE, payload("c1"), source="queue")

    assert finished is not None
    assert (finished.status, finished.error) == (
        CommandStatus.REJECTED,
        {"code": 5, "message": "gone", "details": []},
    )


@pytest.mark.parametrize(
    ("first", "second"),
    [("fail", "reject"), ("reject", "fail"), ("reject", "reject")],
)
def test_an_outcome_is_recorded_once_whichever_delivery_ends_the_command_second(
    journal: Journal, first: str, second: str
) -> None:
    log = journal.port
    log.begin("c1", ENABLE, payload("c1"), source="queue")
    getattr(log, first)("c1", {"code": 5, "message": "first", "details": []})
    getattr(log, second)("c1", {"code": 14, "message": "second", "details": []})

    finished = log.begin("c1", ENABLE, payload("c1"), source="queue")

    assert finished is not None
    expected = CommandStatus.FAILED if first == "fail" else CommandStatus.REJECTED
    assert (finished.status, finished.error) == (
        expected,
        {"code": 5, "message": "first", "details": []},
    )


def test_a_running_command_is_in_progress_until_its_lease_is_over(journal: Journal) -> None:
    log = journal.port
    log.begin("c1", ENABLE, payload("c1"), source="queue")

    with pytest.raises(CommandInProgress):
        log.begin("c1", ENABLE, payload("c1"), source="queue")
    journal.clock.advance(LEASE)

    assert log.begin("c1", ENABLE, payload("c1"), source="queue") is None


def test_a_run_left_running_is_taken_over_at_once_by_the_delivery_carrying_its_mark(
    journal: Journal,
) -> None:
    # The delivery that began the run could not record how it ended (the database went):
    # its retry carries the run's mark and resumes it; a mark of another instant does not.
    log = journal.port
    began_at = journal.clock.now()
    log.begin("c1", ENABLE, payload("c1"), source="queue", at=began_at)
    journal.clock.advance(timedelta(seconds=3))

    with pytest.raises(CommandInProgress):
        log.begin(
            "c1", ENABLE, payload("c1"), source="queue", resumes=began_at - timedelta(seconds=1)
        )
    assert log.begin("c1", ENABLE, payload("c1"), source="queue", resumes=began_at) is None
    entry = log.get("c1")
    assert entry is not None
    assert entry.status is CommandStatus.RUNNING
    # Resumed, the run is the new delivery's: the old mark resumes nothing any more.
    with pytest.raises(CommandInProgress):
        log.begin("c1", ENABLE, payload("c1"), source="queue", resumes=began_at)


def test_a_command_waiting_for_a_retry_or_for_the_budget_begins_again(journal: Journal) -> None:
    log = journal.port
    log.begin("c1", ENABLE, payload("c1"), source="queue")
    log.retrying("c1", {"code": 14, "message": "503", "details": []}, {"attempt": 1})
    assert log.begin("c1", ENABLE, payload("c1"), source="queue") is None

    log.waiting("c1", 1.5)

    assert log.begin("c1", ENABLE, payload("c1"), source="queue") is None


@pytest.mark.parametrize(
    ("command_type", "other_payload"),
    [(ENABLE, payload("c1", "usr_2")), ("billing.register_account", payload("c1"))],
    ids=["another-payload", "another-type"],
)
def test_an_id_of_another_command_is_refused_and_the_outcome_kept(
    journal: Journal, command_type: str, other_payload: dict[str, Any]
) -> None:
    log = journal.port
    log.begin("c1", ENABLE, payload("c1"), source="queue")
    log.succeed("c1", {"ok": True})

    with pytest.raises(CommandIdReused) as reused:
        log.begin("c1", command_type, other_payload, source="queue")

    assert reused.value.recorded_type == ENABLE
    finished = log.begin("c1", ENABLE, payload("c1"), source="queue")
    assert finished is not None
    assert finished.result == {"ok": True}


def test_a_command_accepted_but_never_started_is_stalled_until_published(
    journal: Journal,
) -> None:
    log = journal.port
    journal.accept("c1", payload("c1"))
    journal.accept("c2", payload("c2"))
    log.begin("c2", ENABLE, payload("c2"), source="queue")
    assert log.stalled(timedelta(seconds=60)) == []

    journal.clock.advance(timedelta(seconds=61))
    [stalled] = log.stalled(timedelta(seconds=60))
    log.mark_published(stalled.id)

    assert (stalled.id, stalled.type, stalled.payload) == ("c1", ENABLE, payload("c1"))
    assert log.stalled(timedelta(seconds=60)) == []


def test_a_command_running_long_after_its_message_would_have_come_back_is_stalled(
    journal: Journal,
) -> None:
    """A worker killed while running it, its message lost before the broker recorded it as
    unacknowledged: nothing hands it back, so the sweep publishes it again once it has run
    longer than the broker's visibility timeout (the running lease, 10 min here) and the
    stalled wait allow (``running_older_than``), in real time; that delivery takes the run
    over."""
    log = journal.port
    given_up_after = DEFAULT_RUNNING_LEASE + timedelta(seconds=60)
    journal.accept("c1", payload("c1"))
    log.mark_published("c1")
    log.begin("c1", ENABLE, payload("c1"), source="queue")
    elapse(journal, DEFAULT_RUNNING_LEASE)
    assert log.stalled(timedelta(seconds=60)) == []  # not asked for: as before
    assert log.stalled(timedelta(seconds=60), running_older_than=given_up_after) == []

    elapse(journal, timedelta(seconds=61))
    [stalled] = log.stalled(timedelta(seconds=60), running_older_than=given_up_after)
    log.mark_published(stalled.id)

    assert (stalled.id, stalled.status) == ("c1", CommandStatus.RUNNING)
    assert log.stalled(timedelta(seconds=60), running_older_than=given_up_after) == []
    assert log.begin("c1", ENABLE, payload("c1"), source="queue") is None  # taken over
    log.succeed("c1", {"ok": True})
    elapse(journal, given_up_after * 2)
    assert log.stalled(timedelta(seconds=60), running_older_than=given_up_after) == []


def test_a_business_clock_moved_forward_leaves_a_running_command_to_its_worker(
    journal: Journal,
) -> None:
    # ``clock advance`` (or the tests' shifted clock) moves business time by days: a run is
    # judged abandoned by how long it has really lasted, or every running command would be
    # published again at once, beside the deliveries still running them.
    log = journal.port
    given_up_after = DEFAULT_RUNNING_LEASE + timedelta(seconds=60)
    journal.accept("c1", payload("c1"))
    log.mark_published("c1")
    log.begin("c1", ENABLE, payload("c1"), source="queue")

    journal.clock.advance(timedelta(days=31))

    assert log.stalled(timedelta(seconds=60), running_older_than=given_up_after) == []


def elapse(journal: Journal, how_long: timedelta) -> None:
    """Real time passes: the business clock goes with it."""
    journal.clock.advance(how_long)
    journal.wall_clock.advance(how_long)


def test_a_retry_whose_message_never_came_is_stalled_and_says_how_many_attempts_it_used(
    journal: Journal,
) -> None:
    log = journal.port
    journal.accept("c1", payload("c1"))
    log.mark_published("c1")
    log.begin("c1", ENABLE, payload("c1"), source="queue")
    log.retrying("c1", {"code": 14, "message": "down"}, {"attempt": 1, "delay_seconds": 2.0})
    journal.accept("c2", payload("c2"))
    log.mark_published("c2")
    log.begin("c2", ENABLE, payload("c2"), source="queue")
    log.waiting("c2", 1.0)
    assert log.stalled(timedelta(seconds=60)) == []

    journal.clock.advance(timedelta(seconds=61))
    # The retry was due 2 s after it was recorded: 59 s overdue is not yet stalled.
    assert log.stalled(timedelta(seconds=60)) == []
    journal.clock.advance(timedelta(seconds=2))
    [stalled] = log.stalled(timedelta(seconds=60))
    log.mark_published(stalled.id)

    assert (stalled.id, stalled.status, retries_used(stalled)) == ("c1", CommandStatus.RETRYING, 1)
    assert log.stalled(timedelta(seconds=60)) == []  # and never the wait for the rate budget


def test_commands_awaiting_delivery_since_a_moment_are_those_queued_retrying_or_waiting_since(
    journal: Journal,
) -> None:
    log = journal.port
    for command_id in ("before", "queued", "retrying", "running", "done"):
        journal.accept(command_id, payload(command_id))
        journal.clock.advance(timedelta(seconds=1))
        if command_id == "before":
            since = journal.clock.now()
    for command_id in ("retrying", "running", "done"):
        log.begin(command_id, ENABLE, payload(command_id), source="queue")
    log.retrying("retrying", {"code": 14, "message": "down"}, {"attempt": 1})
    log.succeed("done", {"ok": True})

    awaiting = log.awaiting_delivery_since(since, 10)
    retries_only = log.awaiting_delivery_since(
        since, 10, (CommandStatus.RETRYING, CommandStatus.WAITING)
    )

    assert [record.id for record in awaiting] == ["queued", "retrying"]
    assert [record.id for record in retries_only] == ["retrying"]


# --- pruning ----------------------------------------------------------------------------------


def finish(journal: Journal, command_id: str, status: CommandStatus) -> None:
    """Run the command to ``status`` now (on the journal's clock)."""
    log = journal.port
    log.begin(command_id, ENABLE, payload(command_id), source="queue")
    if status is CommandStatus.SUCCEEDED:
        log.succeed(command_id, {"ok": True})
    elif status is CommandStatus.REJECTED:
        log.reject(command_id, {"code": 5, "message": "gone", "details": []})
    else:
        log.fail(command_id, {"code": 14, "message": "down", "details": []})


def is_recorded(journal: Journal, command_id: str) -> bool:
    """Whether the journal still holds the command (a delivery finds its outcome)."""
    try:
        return (
            journal.port.begin(command_id, ENABLE, payload(command_id), source="queue") is not None
        )
    except CommandInProgress:
        return True


def test_pruning_deletes_only_the_commands_finished_in_the_status_before_the_cutoff(
    journal: Journal,
) -> None:
    finish(journal, "old-ok", CommandStatus.SUCCEEDED)
    finish(journal, "old-failed", CommandStatus.FAILED)
    finish(journal, "old-rejected", CommandStatus.REJECTED)
    journal.clock.advance(timedelta(days=1))
    cutoff = journal.clock.now()
    finish(journal, "new-ok", CommandStatus.SUCCEEDED)
    finish(journal, "new-rejected", CommandStatus.REJECTED)

    counted = journal.port.count_finished(CommandStatus.SUCCEEDED, cutoff)
    deleted = journal.port.prune_finished(CommandStatus.SUCCEEDED, cutoff, 100)
    rejected = journal.port.count_finished(CommandStatus.REJECTED, cutoff)
    deleted_rejected = journal.port.prune_finished(CommandStatus.REJECTED, cutoff, 100)

    assert (counted, deleted, rejected, deleted_rejected) == (1, 1, 1, 1)
    assert journal.port.count_finished(CommandStatus.SUCCEEDED, cutoff) == 0
    assert not is_recorded(journal, "old-ok")
    assert not is_recorded(journal, "old-rejected")
    assert is_recorded(journal, "old-failed")
    assert is_recorded(journal, "new-ok")
    assert is_recorded(journal, "new-rejected")


def test_pruning_takes_the_oldest_first_and_at_most_the_limit(journal: Journal) -> None:
    for command_id in ("first", "second", "third"):
        finish(journal, command_id, CommandStatus.FAILED)
        journal.clock.advance(timedelta(minutes=1))
    cutoff = journal.clock.now()

    first_batch = journal.port.prune_finished(CommandStatus.FAILED, cutoff, 2)
    left_after_it = journal.port.count_finished(CommandStatus.FAILED, cutoff)

    assert (first_batch, left_after_it) == (2, 1)
    assert [is_recorded(journal, c) for c in ("first", "second", "third")] == [False, False, True]
    assert journal.port.prune_finished(CommandStatus.FAILED, cutoff, 2) == 1


@pytest.mark.parametrize(
    "status",
    [CommandStatus.QUEUED, CommandStatus.RUNNING, CommandStatus.RETRYING, CommandStatus.WAITING],
)
def test_a_command_that_has_not_finished_is_never_pruned(
    journal: Journal, status: CommandStatus
) -> None:
    journal.accept("c1", payload("c1"))
    journal.clock.advance(timedelta(days=365))

    with pytest.raises(ValueError, match="never pruned"):
        journal.port.prune_finished(status, journal.clock.now(), 100)
    deleted = sum(
        journal.port.prune_finished(finished, journal.clock.now(), 100)
        for finished in (CommandStatus.SUCCEEDED, CommandStatus.FAILED, CommandStatus.REJECTED)
    )

    assert deleted == 0
    assert journal.port.stalled(timedelta(days=1))[0].id == "c1"


def test_a_pruned_command_id_runs_as_a_new_command(journal: Journal) -> None:
    finish(journal, "c1", CommandStatus.SUCCEEDED)
    journal.clock.advance(timedelta(days=1))
    journal.port.prune_finished(CommandStatus.SUCCEEDED, journal.clock.now(), 100)

    assert journal.port.begin("c1", ENABLE, payload("c1", "usr_2"), source="queue") is None
