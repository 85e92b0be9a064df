"""A fault schedule is drawn from its seed alone (``tests/schedules/plan.py``): the same seed
replays the same workload and the same faults at the same offsets."""

from __future__ import annotations

import pytest

from tests.schedules.plan import FAULT_KINDS, SQLITE_FAULTS, draw
from tests.schedules.run import Outcome, kinds_of, parse, replay_command


def test_the_same_seed_draws_the_same_workload_and_faults_at_the_same_offsets() -> None:
    assert draw(42, FAULT_KINDS) == draw(42, FAULT_KINDS)


def test_another_seed_draws_another_schedule() -> None:
    assert draw(42, FAULT_KINDS).faults != draw(43, FAULT_KINDS).faults


def test_a_schedule_has_ten_faults_of_the_kinds_turned_on_within_its_duration() -> None:
    schedule = draw(5, ("kill_worker", "stripe_5xx"), duration=30.0)
    assert len(schedule.faults) >= 10
    assert {fault.kind for fault in schedule.faults} <= {"kill_worker", "stripe_5xx"}
    assert all(0 <= step.at <= 30.0 for step in (*schedule.faults, *schedule.actions))
    assert 0 < schedule.period_end_at < 30.0


def test_every_kind_is_drawn_over_a_few_schedules() -> None:
    drawn = {fault.kind for seed in range(20) for fault in draw(seed, FAULT_KINDS).faults}
    assert drawn == set(FAULT_KINDS)


def test_faults_are_turned_on_by_name_and_postgres_restart_only_on_postgresql() -> None:
    assert kinds_of(parse(["--faults", "kill_api,clock_jump"])) == ("kill_api", "clock_jump")
    assert kinds_of(parse([])) == SQLITE_FAULTS
    assert "postgres_restart" in kinds_of(parse(["--database", "postgresql"]))
    with pytest.raises(SystemExit, match="postgres_restart"):
        kinds_of(parse(["--faults", "postgres_restart"]))


def test_a_failing_schedule_prints_the_command_that_draws_it_again() -> None:
    schedule = draw(9, ("kill_api", "postgres_restart"), duration=12.0, fault_count=11)
    command = replay_command(Outcome(schedule, database="postgresql"))
    args = parse(command.split()[4:])
    again = draw(args.seed, kinds_of(args), duration=args.duration, fault_count=args.fault_count)
    assert again == schedule
    assert args.database == "postgresql"
