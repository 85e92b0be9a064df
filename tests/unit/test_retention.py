"""Pruning the command log (``application.handlers.operations.retention``) on the in-memory
journal, and beat's schedule of it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from application.handlers.operations.retention import due_for_pruning, prune_command_log
from application.requests.sweeps import CountDueForPruning, PruneCommandLog
from domain.messages import CommandStatus
from tests.support.environment import clear_settings
from tests.support.fakes.application import DEFAULT_RUNNER_POLICY, FakeApplication

ENABLE = "users.enable"


def an_app(
    *, batch_size: int = 1000, max_batches: int = 100, rest_ratio: float = 0.0
) -> FakeApplication:
    retention = replace(
        DEFAULT_RUNNER_POLICY.command_retention,
        batch_size=batch_size,
        max_batches_per_sweep=max_batches,
        rest_ratio=rest_ratio,
    )
    return FakeApplication(policy=replace(DEFAULT_RUNNER_POLICY, command_retention=retention))


def run(app: FakeApplication, command_id: str, status: CommandStatus) -> None:
    """Record a command and take it to ``status`` now."""
    app.commands.accept(command_id, ENABLE, {"user_id": command_id})
    if status is CommandStatus.QUEUED:
        return
    app.commands.begin(command_id, ENABLE, {"user_id": command_id}, source="api")
    if status is CommandStatus.SUCCEEDED:
        app.commands.succeed(command_id, {})
    elif status is CommandStatus.FAILED:
        app.commands.fail(command_id, {"code": 14, "message": "down", "details": []})
    elif status is CommandStatus.REJECTED:
        app.commands.reject(command_id, {"code": 5, "message": "gone", "details": []})
    elif status is CommandStatus.RETRYING:
        app.commands.retrying(command_id, {"code": 14, "message": "down", "details": []})
    elif status is CommandStatus.WAITING:
        app.commands.waiting(command_id, 1.0)


def test_succeeded_commands_go_after_30_days_failed_ones_after_90_and_rejected_after_7() -> None:
    app = an_app()
    run(app, "failed-91-days-ago", CommandStatus.FAILED)
    app.clock.advance(timedelta(days=60))
    run(app, "succeeded-31-days-ago", CommandStatus.SUCCEEDED)
    run(app, "failed-31-days-ago", CommandStatus.FAILED)
    run(app, "rejected-31-days-ago", CommandStatus.REJECTED)
    app.clock.advance(timedelta(days=23))
    run(app, "rejected-8-days-ago", CommandStatus.REJECTED)
    app.clock.advance(timedelta(days=2))
    run(app, "rejected-6-days-ago", CommandStatus.REJECTED)
    app.clock.advance(timedelta(days=4))
    run(app, "succeeded-2-days-ago", CommandStatus.SUCCEEDED)
    app.clock.advance(timedelta(days=2))

    due = due_for_pruning(CountDueForPruning(), app)
    report = prune_command_log(PruneCommandLog(), app)

    assert [(part.status, part.count) for part in due] == [
        (CommandStatus.SUCCEEDED, 1),
        (CommandStatus.FAILED, 1),
        (CommandStatus.REJECTED, 2),
    ]
    assert (report.total, report.complete) == (4, True)
    assert sorted(app.commands.entries) == [
        "failed-31-days-ago",
        "rejected-6-days-ago",
        "succeeded-2-days-ago",
    ]


@pytest.mark.parametrize(
    "status",
    [CommandStatus.QUEUED, CommandStatus.RUNNING, CommandStatus.RETRYING, CommandStatus.WAITING],
)
def test_a_command_that_has_not_finished_stays_however_old(status: CommandStatus) -> None:
    app = an_app()
    run(app, "c1", status)
    app.clock.advance(timedelta(days=3650))

    report = prune_command_log(PruneCommandLog(), app)

    assert report.total == 0
    assert app.commands["c1"].status is status


def test_a_replayed_failed_command_counts_its_age_from_its_new_run() -> None:
    app = an_app()
    run(app, "c1", CommandStatus.FAILED)
    app.clock.advance(timedelta(days=100))
    app.commands.accept("c1", ENABLE, {"user_id": "c1"})  # requeued, as a replay does
    app.commands.begin("c1", ENABLE, {"user_id": "c1"}, source="api")
    app.commands.fail("c1", {"code": 5, "message": "still gone", "details": []})

    assert prune_command_log(PruneCommandLog(), app).total == 0
    app.clock.advance(timedelta(days=91))
    assert prune_command_log(PruneCommandLog(), app).total == 1


def test_a_sweep_deletes_in_batches_and_leaves_the_rest_to_the_next_past_its_budget() -> None:
    app = an_app(batch_size=2, max_batches=3)
    for number in range(7):
        run(app, f"c{number}", CommandStatus.SUCCEEDED)
    app.clock.advance(timedelta(days=31))

    first = prune_command_log(PruneCommandLog(), app)
    second = prune_command_log(PruneCommandLog(), app)

    assert (first.total, first.complete, first.batches) == (6, False, 3)
    assert (second.total, second.complete) == (1, True)
    assert app.commands.prunes == [2, 2, 2, 1, 0, 0]
    assert app.commands.entries == {}


def test_an_operator_prunes_until_done_whatever_the_budget() -> None:
    app = an_app(batch_size=2, max_batches=1)
    for number in range(5):
        run(app, f"c{number}", CommandStatus.SUCCEEDED)
        run(app, f"f{number}", CommandStatus.FAILED)
    app.clock.advance(timedelta(days=91))

    report = prune_command_log(PruneCommandLog(until_done=True), app)

    assert (report.total, report.complete) == (10, True)
    assert app.commands.prunes == [2, 2, 1, 2, 2, 1, 0]


class Stopwatch:
    """The module's clock and sleep: each batch takes 0.1 s; rests are recorded, not slept."""

    def __init__(self) -> None:
        self.now = 0.0
        self.rests: list[float] = []

    def monotonic(self) -> float:
        self.now += 0.05  # read twice a batch: once before, once after
        return self.now

    def sleep(self, seconds: float) -> None:
        self.rests.append(round(seconds, 6))


@pytest.fixture
def stopwatch(monkeypatch: pytest.MonkeyPatch) -> Stopwatch:
    watch = Stopwatch()
    module = "application.handlers.operations.retention.time"
    monkeypatch.setattr(f"{module}.monotonic", watch.monotonic)
    monkeypatch.setattr(f"{module}.sleep", watch.sleep)
    return watch


def test_beats_sweep_rests_after_each_batch_that_deleted_for_its_ratio_of_the_batchs_time(
    stopwatch: Stopwatch,
) -> None:
    app = an_app(batch_size=2, rest_ratio=4.0)
    for number in range(5):
        run(app, f"c{number}", CommandStatus.SUCCEEDED)
    app.clock.advance(timedelta(days=31))

    report = prune_command_log(PruneCommandLog(), app)

    assert report.total == 5
    # Batches of 2, 2, 1 for the succeeded, then one empty batch each for failed and
    # rejected: a rest (4 x 0.05 s) after each batch that deleted, before the next.
    assert stopwatch.rests == [0.2, 0.2, 0.2]


def test_an_operators_prune_and_a_sweep_without_a_ratio_never_rest(stopwatch: Stopwatch) -> None:
    for app, request in (
        (an_app(batch_size=2, rest_ratio=4.0), PruneCommandLog(until_done=True)),
        (an_app(batch_size=2, rest_ratio=0.0), PruneCommandLog()),
    ):
        for number in range(5):
            run(app, f"c{number}", CommandStatus.SUCCEEDED)
        app.clock.advance(timedelta(days=31))
        assert prune_command_log(request, app).total == 5

    assert stopwatch.rests == []


def test_beat_prunes_the_command_log_every_five_minutes_on_the_maintenance_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adapters.messaging.config import celery_config
    from worker.celery_app import create_celery_app
    from worker.settings import Settings

    clear_settings(monkeypatch)
    settings = Settings(redis_url="redis://127.0.0.1:1/0")
    sweep = celery_config(settings)["beat_schedule"]["prune-command-log"]
    app = create_celery_app(settings)

    assert (sweep["task"], sweep["schedule"]) == ("maintenance.prune_command_log", 300.0)
    assert sweep["options"]["expires"] == 300.0
    assert "maintenance.prune_command_log" in app.tasks
    assert app.amqp.router.route({}, sweep["task"])["queue"].name == "maintenance"
    assert (
        settings.command_retention_days,
        settings.failed_command_retention_days,
        settings.rejected_command_retention_days,
        settings.command_retention_batch,
        settings.command_retention_max_batches,
    ) == (30, 90, 7, 1000, 100)
