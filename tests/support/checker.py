"""The independent checker (issue 43): judges a run from what the outside world saw, never from
our tables' word for what happened.

Its inputs are three records kept apart from the system under test:

- **the history**: what the workload was told (each command accepted over HTTP, with the
  answer's status and ``Command-Id``, or published straight onto the queue), the changes it
  asked for and when they take effect, the previews it was answered;
- **Stripe's ledger** (the emulator's): every write it *executed* (its request log, without
  idempotent replays, counting a write whose answer was lost after it acted), and what it
  billed for each period (its invoices' lines);
- **what the system says after quiescence**, read through its API: each command's status, and
  its rows beside Stripe's objects; and the events delivered (stream and webhooks).

:func:`check` returns every :class:`Anomaly`, each of a :class:`AnomalyKind`; an empty list is
a clean run. The checks are plain functions over plain values, so that each can be proven to
see what it must (``tests/unit/test_checker.py`` plants one anomaly of each kind).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum


class AnomalyKind(StrEnum):
    LOST = "lost"
    """A command the system accepted whose effect never happened."""
    DOUBLED = "doubled"
    """An effect Stripe executed more than once (a second customer, a change written twice)."""
    MISBILLED = "misbilled"
    """A period whose net billed amount differs, to the cent, from the plan in force at its
    start plus the prorations of the changes made in it."""
    PREVIEW_MISMATCH = "preview_mismatch"
    """A preview that differs from the invoice it previewed."""
    STALE_ROW = "stale_row"
    """Our row (read through the API) differs from Stripe's object after quiescence."""
    EVENT_TWICE = "event_twice"
    """An event emitted more than once for one change (two event ids for one fact)."""
    EVENT_NEVER = "event_never"
    """An event never delivered for a change that happened."""
    UNFINISHED = "unfinished"
    """A command still ``queued``, ``running``, ``retrying`` or ``waiting`` after quiescence."""


@dataclass(frozen=True)
class Anomaly:
    kind: AnomalyKind
    subject: str
    """What it is about: a command id, an organization, a subscription and period, an event."""
    detail: str

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.subject}: {self.detail}"


Effect = tuple[str, str]
"""One effect at Stripe that a command must have made exactly once: (its kind, its subject),
e.g. ``("customer", org_id)`` or ``("subscription_write", "chg_1:apply")``."""


@dataclass(frozen=True)
class Accepted:
    """A command the system accepted (HTTP 200 or 202 with its ``Command-Id``, or a publish
    onto the queue), and the effects at Stripe it must make exactly once (none for a command
    that touches only our side, such as enabling a user or an offline account)."""

    command_id: str
    effects: tuple[Effect, ...] = ()


@dataclass(frozen=True)
class PriceSpan:
    """A price in force on a subscription from ``since`` (the plan a change put in force at
    its boundary, or at once); ``amount``: the price's unit amount, in minor units."""

    since: datetime
    amount: int


@dataclass(frozen=True)
class BilledPeriod:
    """What Stripe billed for one period of a subscription: the net of every invoice line
    covering it (the renewal, prorations, corrections)."""

    subscription: str
    start: datetime
    end: datetime
    net: int


@dataclass(frozen=True)
class PreviewAnswered:
    """A preview the workload was answered, and the invoice the change made at its
    ``proration_date`` produced (``None``: no change followed it)."""

    preview_id: str
    amount_due: int
    invoiced: int | None


@dataclass
class Observed:
    """Everything the checker judges, gathered by the runner after quiescence."""

    accepted: list[Accepted] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)
    """Command id → its status read through the API (``GET /v1beta1/commands/{id}``)."""
    executed: list[Effect] = field(default_factory=list)
    """Every effect Stripe executed, once per execution (replays excluded)."""
    prices: dict[str, list[PriceSpan]] = field(default_factory=dict)
    """Subscription → the prices in force, from the workload's history (its accepted changes
    and when each takes effect), oldest first."""
    periods: list[BilledPeriod] = field(default_factory=list)
    previews: list[PreviewAnswered] = field(default_factory=list)
    our_rows: dict[str, Mapping[str, object]] = field(default_factory=dict)
    """Subject → the fields our API shows of it (an account's customer, a subscription's
    price and period)."""
    stripe_objects: dict[str, Mapping[str, object]] = field(default_factory=dict)
    """Subject → the same fields of Stripe's object."""
    events_expected: set[str] = field(default_factory=set)
    """The events the history says must be delivered, each by its key (type and subject)."""
    events_delivered: list[tuple[str, str]] = field(default_factory=list)
    """Each delivery: (the event's id, its key). A delivery repeated under one id is what
    at-least-once delivery allows (the consumer deduplicates by id); two ids under one key are
    the event emitted twice."""


FINISHED = {"succeeded", "rejected", "failed"}


def check(observed: Observed) -> list[Anomaly]:
    """Every anomaly in ``observed``, by kind."""
    return [
        *unfinished(observed.accepted, observed.statuses),
        *lost_or_doubled(observed.accepted, observed.executed),
        *misbilled(observed.periods, observed.prices),
        *preview_mismatches(observed.previews),
        *stale_rows(observed.our_rows, observed.stripe_objects),
        *events_twice_or_never(observed.events_expected, observed.events_delivered),
    ]


def unfinished(accepted: Iterable[Accepted], statuses: Mapping[str, str]) -> list[Anomaly]:
    return [
        Anomaly(AnomalyKind.UNFINISHED, command.command_id, f"status {status!r}")
        for command in accepted
        if (status := statuses.get(command.command_id, "unknown")) not in FINISHED
    ]


def lost_or_doubled(accepted: Iterable[Accepted], executed: Sequence[Effect]) -> list[Anomaly]:
    """Each effect an accepted command must make, executed exactly once; and no effect executed
    twice, whoever asked for it."""
    done = Counter(executed)
    found: list[Anomaly] = []
    expected: set[Effect] = set()
    for command in accepted:
        for effect in command.effects:
            expected.add(effect)
            if done[effect] == 0:
                found.append(
                    Anomaly(AnomalyKind.LOST, command.command_id, f"{_named(effect)} never made")
                )
    for effect, times in sorted(done.items()):
        if times > 1:
            found.append(
                Anomaly(AnomalyKind.DOUBLED, effect[1], f"{_named(effect)} made {times} times")
            )
    return found


def expected_net(start: datetime, end: datetime, prices: Sequence[PriceSpan]) -> int:
    """What a period costs: the price in force at its start, plus, for each price that took
    effect inside it, Stripe's proration of the rest of the period (a credit of the old price
    and a debit of the new, each rounded to the minor unit, as Stripe rounds each line)."""
    in_force = [span for span in prices if span.since <= start]
    if not in_force:
        return 0
    amount = in_force[-1].amount
    net = amount
    length = (end - start).total_seconds()
    for span in prices:
        if start < span.since < end:
            remaining = (end - span.since).total_seconds() / length
            net += round(span.amount * remaining) - round(amount * remaining)
            amount = span.amount
    return net


def misbilled(
    periods: Iterable[BilledPeriod], prices: Mapping[str, Sequence[PriceSpan]]
) -> list[Anomaly]:
    found = []
    for period in periods:
        expected = expected_net(period.start, period.end, prices.get(period.subscription, ()))
        if period.net != expected:
            found.append(
                Anomaly(
                    AnomalyKind.MISBILLED,
                    f"{period.subscription}@{period.start.isoformat()}",
                    f"billed {period.net} net, the plans in force cost {expected}",
                )
            )
    return found


def preview_mismatches(previews: Iterable[PreviewAnswered]) -> list[Anomaly]:
    return [
        Anomaly(
            AnomalyKind.PREVIEW_MISMATCH,
            preview.preview_id,
            f"previewed {preview.amount_due}, invoiced {preview.invoiced}",
        )
        for preview in previews
        if preview.invoiced is not None and preview.invoiced != preview.amount_due
    ]


def stale_rows(
    ours: Mapping[str, Mapping[str, object]], stripes: Mapping[str, Mapping[str, object]]
) -> list[Anomaly]:
    found = []
    for subject in sorted(set(ours) | set(stripes)):
        mine, theirs = ours.get(subject), stripes.get(subject)
        if mine is None or theirs is None:
            where = "at Stripe only" if mine is None else "in our rows only"
            found.append(Anomaly(AnomalyKind.STALE_ROW, subject, where))
            continue
        differing = sorted(name for name in theirs if mine.get(name) != theirs[name])
        if differing:
            found.append(
                Anomaly(
                    AnomalyKind.STALE_ROW,
                    subject,
                    ", ".join(
                        f"{n}: ours {mine.get(n)!r}, Stripe's {theirs[n]!r}" for n in differing
                    ),
                )
            )
    return found


def events_twice_or_never(
    expected: set[str], delivered: Sequence[tuple[str, str]]
) -> list[Anomaly]:
    seen = Counter(key for _event_id, key in set(delivered))
    found = [
        Anomaly(AnomalyKind.EVENT_NEVER, key, "never delivered")
        for key in sorted(expected)
        if seen[key] == 0
    ]
    found += [
        Anomaly(AnomalyKind.EVENT_TWICE, key, f"emitted {times} times (distinct ids)")
        for key, times in sorted(seen.items())
        if times > 1
    ]
    return found


def report(anomalies: Sequence[Anomaly]) -> str:
    """One line per anomaly, grouped by kind, with a count per kind; "no anomalies" if none."""
    if not anomalies:
        return "no anomalies"
    by_kind = Counter(anomaly.kind for anomaly in anomalies)
    lines = [", ".join(f"{kind.value}: {count}" for kind, count in sorted(by_kind.items()))]
    lines += [f"  {anomaly}" for anomaly in sorted(anomalies, key=lambda a: (a.kind, a.subject))]
    return "\n".join(lines)


def _named(effect: Effect) -> str:
    kind, subject = effect
    return f"{kind} {subject}"
