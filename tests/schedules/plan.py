"""A schedule drawn from its seed alone: what the workload does and which faults strike, each
at its offset from the schedule's start. Nothing here touches a process: the same seed gives
the same :class:`Schedule`, on any machine (``random.Random(seed)``, nothing else)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

FAULT_KINDS = (
    "stripe_latency",
    "stripe_5xx",
    "stripe_429",
    "stripe_drop_before",
    "stripe_drop_after",
    "kill_worker",
    "kill_beat",
    "kill_api",
    "redis_restart",
    "redis_kill",
    "redis_restart_empty",
    "clock_jump",
    "postgres_restart",
    "stripe_latency_across_period_end",
    "redis_read_only",
    "redis_partition",
    "postgres_kill_in_commit",
    "redis_failover",
    "postgres_switchover",
)
"""The nemesis' catalogue, as the single-box stack supports it (the ``postgres_`` kinds only
on PostgreSQL). New kinds go at the end: a catalogue's order is part of every draw from it."""

BEFORE_REDIS_FAILOVER = FAULT_KINDS[: FAULT_KINDS.index("redis_failover")]
"""The catalogue before a managed Redis's failover joined it: the seeds kept from then draw
from it, so that they replay as they were drawn."""

BEFORE_POSTGRES_SWITCHOVER = FAULT_KINDS[: FAULT_KINDS.index("postgres_switchover")]
"""The catalogue before PostgreSQL's switchover joined it (the seeds drawn on PostgreSQL's
whole catalogue until then replay on it)."""

POSTGRES_ONLY = frozenset({"postgres_restart", "postgres_kill_in_commit", "postgres_switchover"})

SQLITE_FAULTS = tuple(kind for kind in FAULT_KINDS if kind not in POSTGRES_ONLY)

SQLITE_BEFORE_REDIS_FAILOVER = tuple(
    kind for kind in BEFORE_REDIS_FAILOVER if kind not in POSTGRES_ONLY
)

AROUND_THE_PERIOD_END = frozenset({"stripe_latency_across_period_end"})
"""Faults struck just before the month passes, whenever the seed drew them: Stripe's slow
answers straddle the subscriptions' period end (the renewal's race)."""

ACTION_KINDS = (
    "account_online",
    "account_offline",
    "enable_user",
    "change_now",
    "change_at_period_end",
    "preview_then_change",
    "cancel_staged",
)

STRIPE_SIDE_KINDS = ("dashboard_price_change", "dashboard_cancel")
"""What happens at Stripe without us, arriving as signed webhooks: someone changes a
subscription's price in Stripe's dashboard (prorated, as the dashboard does by default), or
cancels it at its period's end."""

PLANS = ("starter", "team", "scale")
PLAN_AMOUNTS = {"starter": 900, "team": 2900, "scale": 9900}
MODES = ("sync", "async")


@dataclass(frozen=True)
class Step:
    """One thing done at ``at`` seconds after the schedule's start: a workload action or a
    fault (``kind``), with the values the seed chose for it."""

    at: float
    kind: str
    args: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        values = " ".join(f"{name}={value}" for name, value in sorted(self.args.items()))
        return f"+{self.at:5.1f}s {self.kind}{' ' + values if values else ''}"


@dataclass(frozen=True)
class Schedule:
    seed: int
    duration: float
    organizations: int
    """Organizations without a billing account, for the workload to create one for."""
    users: int
    """Disabled users, for the workload to enable."""
    subscriptions: int
    """Subscriptions (on the starter plan) made before the schedule starts."""
    actions: tuple[Step, ...]
    faults: tuple[Step, ...]
    period_end_at: float
    """When a month passes (both clocks): the subscriptions' periods end inside the schedule."""
    kinds: tuple[str, ...] = FAULT_KINDS
    """The catalogue the faults were drawn from (the draw depends on it, order included)."""
    stripe_side: bool = True
    """Whether Stripe's side acts too (:data:`STRIPE_SIDE_KINDS`, drawn from a stream of
    their own) and Stripe's webhooks reach the API."""


def draw(
    seed: int,
    faults: Sequence[str],
    *,
    duration: float = 40.0,
    fault_count: int = 10,
    stripe_side: bool = True,
) -> Schedule:
    """The schedule of ``seed``: an action for every two seconds of ``duration`` and
    ``fault_count`` faults of the ``faults`` kinds, each at a seeded offset (the faults in
    the first nine tenths, so that the last one's effects are still inside the schedule)."""
    rng = random.Random(seed)
    organizations = rng.randint(3, 5)
    users = rng.randint(3, 6)
    subscriptions = rng.randint(2, 3)
    actions = []
    org_index = user_index = 0
    for _ in range(int(duration / 2)):
        kind = rng.choice(ACTION_KINDS)
        args: dict[str, Any] = {}
        if kind in {"account_online", "account_offline"}:
            if org_index >= organizations:
                kind, args = "enable_user", {}
            else:
                args["org"] = org_index
                org_index += 1
        if kind == "enable_user":
            args["user"] = user_index % users
            user_index += 1
            args["mode"] = rng.choice((*MODES, "queue"))
        elif kind in {"change_now", "change_at_period_end", "preview_then_change"}:
            args["subscription"] = rng.randrange(subscriptions)
            args["plan"] = rng.choice(PLANS)
        elif kind == "cancel_staged":
            args["subscription"] = rng.randrange(subscriptions)
        if kind in {"account_online", "account_offline", "change_now", "change_at_period_end"}:
            args["mode"] = rng.choice(MODES)
        actions.append(Step(round(rng.uniform(0, duration), 1), kind, args))
    fault_steps = []
    for _ in range(fault_count):
        kind = rng.choice(tuple(faults))
        fault_steps.append(
            Step(round(rng.uniform(0, duration * 0.9), 1), kind, _fault_args(rng, kind))
        )
    period_end_at = round(rng.uniform(duration * 0.4, duration * 0.7), 1)
    if stripe_side:
        actions += _stripe_side(seed, duration, subscriptions)
    fault_steps = [
        Step(round(max(0.0, period_end_at - 0.3), 1), step.kind, step.args)
        if step.kind in AROUND_THE_PERIOD_END
        else step
        for step in fault_steps
    ]
    return Schedule(
        seed=seed,
        duration=duration,
        organizations=organizations,
        users=users,
        subscriptions=subscriptions,
        actions=tuple(sorted(actions, key=lambda step: step.at)),
        faults=tuple(sorted(fault_steps, key=lambda step: step.at)),
        period_end_at=period_end_at,
        kinds=tuple(faults),
        stripe_side=stripe_side,
    )


def _stripe_side(seed: int, duration: float, subscriptions: int) -> list[Step]:
    """Up to two changes made in Stripe's dashboard, drawn from a stream of their own: every
    other draw of the seed (its actions, its faults, their offsets) is what it was before
    these were added, so a seed kept as a regression test still meets the faults it found."""
    rng = random.Random(f"stripe-side:{seed}")
    steps = []
    for _ in range(rng.randint(0, 2)):
        at = round(rng.uniform(0, duration * 0.9), 1)
        kind = rng.choice(STRIPE_SIDE_KINDS)
        args: dict[str, Any] = {"subscription": rng.randrange(subscriptions)}
        if kind == "dashboard_price_change":
            args["plan"] = rng.choice(PLANS)
        steps.append(Step(at, kind, args))
    return steps


def _fault_args(rng: random.Random, kind: str) -> dict[str, Any]:
    if kind == "stripe_latency":
        return {"latency_ms": rng.randint(500, 4000), "count": rng.randint(2, 8)}
    if kind == "stripe_latency_across_period_end":
        return {"latency_ms": rng.randint(1000, 5000), "count": rng.randint(4, 10)}
    if kind.startswith("stripe_"):
        return {"count": rng.randint(1, 4)}
    if kind in {"kill_worker", "postgres_kill_in_commit"}:
        return {"worker": rng.choice(("w1", "w2"))}
    if kind in {"redis_read_only", "redis_partition"}:
        return {"seconds": round(rng.uniform(1.0, 6.0), 1)}
    if kind == "clock_jump":
        return {"hours": rng.randint(1, 72)}
    return {}
