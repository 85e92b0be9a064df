"""A fault schedule is drawn from its seed alone (``tests/schedules/plan.py``): the same seed
replays the same workload and the same faults at the same offsets."""

from __future__ import annotations

import pytest

from tests.chaos.test_fault_schedules import FIRST_SQLITE_CATALOGUE
from tests.schedules.plan import FAULT_KINDS, SQLITE_FAULTS, STRIPE_SIDE_KINDS, draw
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


def test_faults_are_turned_on_by_name_and_postgres_faults_only_on_postgresql() -> None:
    assert kinds_of(parse(["--faults", "kill_api,clock_jump"])) == ("kill_api", "clock_jump")
    assert kinds_of(parse([])) == SQLITE_FAULTS
    on_postgres = kinds_of(parse(["--database", "postgresql"]))
    postgres_only = ("postgres_restart", "postgres_kill_in_commit", "postgres_switchover")
    assert set(postgres_only) <= set(on_postgres)
    for kind in postgres_only:
        with pytest.raises(SystemExit, match=kind):
            kinds_of(parse(["--faults", kind]))


def test_stripe_slow_across_the_period_end_strikes_just_before_the_month_passes() -> None:
    schedule = draw(3, ("stripe_latency_across_period_end", "kill_api"), duration=30.0)
    across = [f for f in schedule.faults if f.kind == "stripe_latency_across_period_end"]
    assert across
    assert {fault.at for fault in across} == {round(schedule.period_end_at - 0.3, 1)}
    assert all(fault.args["latency_ms"] >= 1000 for fault in across)


def test_a_catalogue_without_the_new_kinds_draws_what_it_drew_before_they_came() -> None:
    """A seed kept with its catalogue replays its schedule: seed 100 on the first catalogue
    (a regression seed, ``tests/chaos/test_fault_schedules.py``) still restarts Redis at
    +4.3 s first, and its month still passes at +23.1 s, as before the kinds that came
    since."""
    schedule = draw(100, FIRST_SQLITE_CATALOGUE, duration=40.0)
    assert (str(schedule.faults[0]), schedule.period_end_at) == ("+  4.3s redis_restart", 23.1)


def test_a_failing_schedule_prints_the_command_that_draws_it_again() -> None:
    schedule = draw(9, ("kill_api", "postgres_restart"), duration=12.0, fault_count=11)
    command = replay_command(Outcome(schedule, database="postgresql"))
    args = parse(command.split()[4:])
    again = draw(args.seed, kinds_of(args), duration=args.duration, fault_count=args.fault_count)
    assert again == schedule
    assert args.database == "postgresql"


def test_stripe_s_side_adds_its_changes_and_leaves_every_other_draw_of_the_seed_as_it_was() -> None:
    for seed in range(30):
        with_it, without = draw(seed, FAULT_KINDS), draw(seed, FAULT_KINDS, stripe_side=False)
        ours = tuple(step for step in with_it.actions if step.kind not in STRIPE_SIDE_KINDS)
        assert (ours, with_it.faults, with_it.period_end_at) == (
            without.actions,
            without.faults,
            without.period_end_at,
        )
        assert not {step.kind for step in without.actions} & set(STRIPE_SIDE_KINDS)
    drawn = {
        step.kind
        for seed in range(30)
        for step in draw(seed, FAULT_KINDS).actions
        if step.kind in STRIPE_SIDE_KINDS
    }
    assert drawn == set(STRIPE_SIDE_KINDS)


def test_a_schedule_without_stripe_s_side_replays_with_the_option_that_leaves_it_out() -> None:
    schedule = draw(500, SQLITE_FAULTS, stripe_side=False)
    assert replay_command(Outcome(schedule)).endswith("--no-stripe-side")
    assert not parse(["--no-stripe-side"]).stripe_side
    assert parse([]).stripe_side
