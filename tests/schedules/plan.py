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
)
"""The nemesis' catalogue, as the single-box stack supports it (``postgres_restart`` only on
PostgreSQL)."""

SQLITE_FAULTS = tuple(kind for kind in FAULT_KINDS if kind != "postgres_restart")

ACTION_KINDS = (
    "account_online",
    "account_offline",
    "enable_user",
    "change_now",
    "change_at_period_end",
    "preview_then_change",
    "cancel_staged",
)

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


def draw(
    seed: int, faults: Sequence[str], *, duration: float = 40.0, fault_count: int = 10
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
    return Schedule(
        seed=seed,
        duration=duration,
        organizations=organizations,
        users=users,
        subscriptions=subscriptions,
        actions=tuple(sorted(actions, key=lambda step: step.at)),
        faults=tuple(sorted(fault_steps, key=lambda step: step.at)),
        period_end_at=round(rng.uniform(duration * 0.4, duration * 0.7), 1),
        kinds=tuple(faults),
    )


def _fault_args(rng: random.Random, kind: str) -> dict[str, Any]:
    if kind == "stripe_latency":
        return {"latency_ms": rng.randint(500, 4000), "count": rng.randint(2, 8)}
    if kind.startswith("stripe_"):
        return {"count": rng.randint(1, 4)}
    if kind == "kill_worker":
        return {"worker": rng.choice(("w1", "w2"))}
    if kind == "clock_jump":
        return {"hours": rng.randint(1, 72)}
    return {}
