"""``python3 -m worker.dev chaos``: seeded fault schedules over the real stack, judged by the
independent checker (issue 43; docs/testing.md, "Fault schedules").

    python3 -m worker.dev chaos [--seed S] [--schedules N] [--database sqlite|postgresql]
                                [--faults kind,kind] [--fault-count K] [--duration SECONDS]
                                [--workdir DIR]
                                [--list-faults]

Schedule ``i`` of a run has the seed ``S + i``: each is drawn from its seed alone
(``tests/schedules/plan.py``), so ``--seed`` of a failing schedule replays it (the same
workload and faults at the same offsets; a busy machine may run a step a little later).
Exits 1 when any schedule found an anomaly.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.schedules.judge import EventReader, judge, listed_statuses, wait_for_quiescence
from tests.schedules.nemesis import calm, inject, month_passes
from tests.schedules.plan import (
    FAULT_KINDS,
    SQLITE_FAULTS,
    STRIPE_SIDE_KINDS,
    Schedule,
    Step,
    draw,
)
from tests.schedules.system import running_system
from tests.schedules.workload import History, Workload
from tests.support.checker import Anomaly, AnomalyKind, report
from tests.support.postgres import PostgresCluster, start_cluster

DEFAULT_FAULT_COUNT = 10
DEFAULT_DURATION = 40.0


@dataclass
class Outcome:
    schedule: Schedule
    injected: list[tuple[Step, float]] = field(default_factory=list)
    """Each fault and the offset it was actually injected at."""
    seen: dict[int, str] = field(default_factory=dict)
    """What the nemesis saw as it struck, by the fault's index in :attr:`injected` (the
    commits a kill inside commits found waiting)."""
    anomalies: list[Anomaly] = field(default_factory=list)
    quiescence: float | None = None
    database: str = "sqlite"
    accepted: int = 0
    sent: int = 0
    errors: list[str] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    """The accepted commands by their final status (through the API)."""
    compared: str = ""
    """What the checker compared, in a few words."""
    published_again: int = 0
    """Queue publishes the log did not know after the schedule, published again by the other
    service under their ids (its recipe after a failover: Redis lost them with its data)."""
    busy: list[str] = field(default_factory=list)
    """What was still in flight when quiescence was waited for in vain."""
    at_stripe: list[str] = field(default_factory=list)
    """What was done at Stripe's dashboard (not through us), and whether it was made."""
    ended_failed: list[str] = field(default_factory=list)
    """Commands that ended ``failed`` (their retries spent: an operator's to replay), which
    the report names though they are no anomaly."""

    @property
    def failed(self) -> bool:
        return bool(self.anomalies or self.errors)


def run_schedule(
    schedule: Schedule, workdir: Path, database: str, postgres: PostgresCluster | None
) -> Outcome:
    outcome = Outcome(schedule, database=database)
    with running_system(schedule, workdir, database, postgres) as system:
        history = History(disabled_users=set(system.users))
        events = EventReader(system)
        system.before_redis_empties.append(events.read)
        workload = Workload(system, history)
        errors: list[str] = []

        def act(step: Step) -> None:
            try:
                workload.act(step)
            except Exception as error:  # the workload's own failure, not the system's
                errors.append(f"{step}: {type(error).__name__}: {error}")

        timeline = sorted(
            [
                *((step.at, 0, step) for step in schedule.actions),
                *((step.at, 1, step) for step in schedule.faults),
                (schedule.period_end_at, 2, Step(schedule.period_end_at, "month_passes")),
            ],
            key=lambda entry: (entry[0], entry[1]),
        )
        started = time.monotonic()
        started_wall = time.time()
        with ThreadPoolExecutor(max_workers=4, thread_name_prefix="workload") as users:
            for at, order, step in timeline:
                delay = at - (time.monotonic() - started)
                if delay > 0:
                    time.sleep(delay)
                if order == 0:
                    users.submit(act, step)
                    continue
                offset = time.monotonic() - started
                try:
                    if order == 1:
                        seen = inject(system, step)
                        if seen:
                            outcome.seen[len(outcome.injected)] = seen
                        outcome.injected.append((step, offset))
                    else:
                        month_passes(system)
                except Exception as error:
                    errors.append(f"{step}: {type(error).__name__}: {error}")
        calm(system)
        outcome.quiescence = wait_for_quiescence(system, why=outcome.busy)
        outcome.published_again = workload.publish_again_what_the_log_does_not_know(
            lambda: set(listed_statuses(system))
        )
        workload.close()
        if outcome.published_again:
            outcome.quiescence = wait_for_quiescence(system, why=outcome.busy)
        outcome.anomalies, observed = judge(system, history, events)
        outcome.statuses = Counter(observed.statuses.values())
        outcome.anomalies = [
            _located(anomaly, history, started_wall) for anomaly in outcome.anomalies
        ]
        outcome.compared = (
            f"{len(observed.executed)} Stripe writes, {len(observed.stripe_objects)} objects,"
            f" {len(observed.periods)} periods,"
            f" {sum(p.invoiced is not None for p in observed.previews)} previews invoiced,"
            f" {len(observed.events_expected)} events"
        )
        outcome.ended_failed = [
            f"{sent.action} {sent.subject} at +{sent.at - started_wall:.1f}s"
            for sent in history.sent
            if sent.command_id is not None and observed.statuses.get(sent.command_id) == "failed"
        ]
        if outcome.quiescence is None:
            still = f" (still: {outcome.busy[-1]})" if outcome.busy else ""
            outcome.anomalies.append(
                Anomaly(AnomalyKind.UNFINISHED, "system", f"never quiet after the schedule{still}")
            )
        ours = [sent for sent in history.sent if sent.action not in STRIPE_SIDE_KINDS]
        outcome.sent = len(ours)
        outcome.accepted = sum(1 for sent in ours if sent.command_id is not None)
        outcome.at_stripe = [
            f"{sent.action} {sent.subject}{f' to {sent.plan}' if sent.plan else ''}"
            f" at +{sent.at - started_wall:.1f}s"
            + ("" if sent.status == 200 else f" (not made: {sent.body})")
            for sent in history.sent
            if sent.action in STRIPE_SIDE_KINDS
        ]
        outcome.errors = errors
    return outcome


def _located(anomaly: Anomaly, history: History, started: float) -> Anomaly:
    """``anomaly`` with what the workload did to its command, and when, if it is one's."""
    for sent in history.sent:
        if sent.command_id == anomaly.subject:
            offset = sent.at - started
            where = f"{sent.action} {sent.subject} at +{offset:.1f}s, answered {sent.status}"
            return Anomaly(anomaly.kind, f"{anomaly.subject} ({where})", anomaly.detail)
    return anomaly


def describe(outcome: Outcome) -> str:
    schedule = outcome.schedule
    quiet = "never" if outcome.quiescence is None else f"{outcome.quiescence:.1f}s"
    lines = [
        f"seed {schedule.seed}: {'FAILED' if outcome.failed else 'ok'} —"
        f" {outcome.sent} commands sent, {outcome.accepted} accepted,"
        f" {len(outcome.injected)} faults, quiet after {quiet}",
    ]
    statuses = ", ".join(f"{name} {count}" for name, count in sorted(outcome.statuses.items()))
    lines.append(f"  commands: {statuses or 'none'}; judged: {outcome.compared}")
    lines += [f"  at Stripe's dashboard: {change}" for change in outcome.at_stripe]
    lines += [f"  ended failed (replayable): {command}" for command in outcome.ended_failed]
    if outcome.published_again:
        lines.append(
            f"  published again by the other service (unknown to the log after the"
            f" schedule): {outcome.published_again}"
        )
    lines += [
        f"  fault {step} (injected at +{offset:.1f}s"
        + (f"; {outcome.seen[index]})" if index in outcome.seen else ")")
        for index, (step, offset) in enumerate(outcome.injected)
    ]
    lines += [f"  {line}" for line in report(outcome.anomalies).splitlines()]
    lines += [f"  workload error: {error}" for error in outcome.errors]
    if outcome.failed:
        lines.append(f"  replay: {replay_command(outcome)}")
    return "\n".join(lines)


def replay_command(outcome: Outcome) -> str:
    """The command that draws this schedule again (the options that differ from the
    defaults, the catalogue's order included)."""
    schedule = outcome.schedule
    words = ["python3 -m worker.dev chaos", f"--seed {schedule.seed}"]
    if outcome.database != "sqlite":
        words.append(f"--database {outcome.database}")
    default = FAULT_KINDS if outcome.database == "postgresql" else SQLITE_FAULTS
    if schedule.kinds != default:
        words.append(f"--faults {','.join(schedule.kinds)}")
    if len(schedule.faults) != DEFAULT_FAULT_COUNT:
        words.append(f"--fault-count {len(schedule.faults)}")
    if schedule.duration != DEFAULT_DURATION:
        words.append(f"--duration {schedule.duration:g}")
    if not schedule.stripe_side:
        words.append("--no-stripe-side")
    return " ".join(words)


def summary(outcomes: Sequence[Outcome]) -> str:
    faults = Counter(step.kind for outcome in outcomes for step, _ in outcome.injected)
    anomalies = Counter(a.kind.value for outcome in outcomes for a in outcome.anomalies)
    quiet = sorted(o.quiescence for o in outcomes if o.quiescence is not None)
    lines = [
        f"schedules: {len(outcomes)}, failed: {sum(o.failed for o in outcomes)}",
        "faults injected: "
        + (", ".join(f"{kind} {count}" for kind, count in sorted(faults.items())) or "none"),
        "anomalies: "
        + (", ".join(f"{kind} {count}" for kind, count in sorted(anomalies.items())) or "0"),
    ]
    if quiet:
        p99 = quiet[min(len(quiet) - 1, round(0.99 * (len(quiet) - 1)))]
        lines.append(f"time to quiescence: p50 {statistics.median(quiet):.1f}s, p99 {p99:.1f}s")
    failing = [str(o.schedule.seed) for o in outcomes if o.failed]
    if failing:
        lines.append(f"failing seeds: {' '.join(failing)}")
    return "\n".join(lines)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python3 -m worker.dev chaos", description=__doc__)
    parser.add_argument("--seed", type=int, default=None, help="the first schedule's seed")
    parser.add_argument("--schedules", type=int, default=1)
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--faults", default=None, help="the fault kinds, comma-separated")
    parser.add_argument(
        "--fault-count", type=int, default=DEFAULT_FAULT_COUNT, help="faults per schedule"
    )
    parser.add_argument(
        "--duration", type=float, default=DEFAULT_DURATION, help="seconds per schedule"
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="keep each schedule's logs, database and Redis data here (default: a temporary"
        " directory, removed)",
    )
    parser.add_argument(
        "--no-stripe-side",
        dest="stripe_side",
        action="store_false",
        help="no changes at Stripe's dashboard, and no webhooks (as the schedules before them)",
    )
    parser.add_argument("--list-faults", action="store_true")
    return parser.parse_args(argv)


def kinds_of(args: argparse.Namespace) -> tuple[str, ...]:
    allowed = FAULT_KINDS if args.database == "postgresql" else SQLITE_FAULTS
    if args.faults is None:
        return allowed
    asked = tuple(kind.strip() for kind in args.faults.split(",") if kind.strip())
    unknown = [kind for kind in asked if kind not in allowed]
    if unknown or not asked:
        raise SystemExit(
            f"unknown fault kinds on {args.database}: {', '.join(unknown) or '(none given)'}"
            f" (--list-faults names them)"
        )
    return asked


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.list_faults:
        for kind in FAULT_KINDS:
            print(kind + ("  (postgresql only)" if kind not in SQLITE_FAULTS else ""))
        return 0
    kinds = kinds_of(args)
    first = args.seed if args.seed is not None else int(time.time()) % 1_000_000
    print(f"chaos: {args.schedules} schedule(s) from seed {first} on {args.database}", flush=True)
    outcomes = []
    postgres = start_cluster() if args.database == "postgresql" else None
    try:
        with contextlib.ExitStack() as cleanup:
            tmp = args.workdir or cleanup.enter_context(
                tempfile.TemporaryDirectory(prefix="billing-chaos-")
            )
            for index in range(args.schedules):
                schedule = draw(
                    first + index,
                    kinds,
                    duration=args.duration,
                    fault_count=args.fault_count,
                    stripe_side=args.stripe_side,
                )
                try:
                    outcome = run_schedule(schedule, Path(tmp), args.database, postgres)
                except Exception as error:  # the system never came up: that seed failed
                    outcome = Outcome(schedule, database=args.database)
                    outcome.errors.append(f"could not run: {type(error).__name__}: {error}")
                outcomes.append(outcome)
                print(describe(outcome), flush=True)
    finally:
        if postgres is not None:
            postgres.stop()
    print(summary(outcomes))
    return 1 if any(outcome.failed for outcome in outcomes) else 0


if __name__ == "__main__":
    threading.current_thread().name = "chaos"
    sys.exit(main())
