"""The gauges of the whole system, computed when beat's exporter is scraped.

They describe shared state (Redis queues, the database, the Stripe budget kept in Redis), so
one process computes them, whatever the number of workers: beat, of which one runs. A part
that cannot be read (the database down) is left out of that scrape and logged; the others
are still served. The collector only shapes figures into metric families: the composition
root hands it the readers of each part, its clock and the budget.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from domain.operations.silent_loops import Silence
from domain.ports.application import Clock
from domain.provider.rate_budget import RateBudget
from domain.subscriptions.change_states import ChangeState
from domain.webhooks import DeliveryState, EndpointState

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DatabaseFigures:
    """What the database tells at one scrape (read by ``adapters.db.gauges``)."""

    changes_by_state: Mapping[str, int]
    oldest_due_change: datetime | None
    """When the oldest change that is due and not made became due (``None``: none is)."""
    failed_commands: int
    rejected_commands: int
    deliveries_by_state: Mapping[str, int]
    endpoints_by_state: Mapping[str, int]
    unpublished_events: int
    pending_accounts: int
    oldest_pending_account: datetime | None
    subscriptions_off_plan: Mapping[str, int] = field(default_factory=dict)
    """Live subscriptions Stripe bills at a price that is not their plan's, by kind
    (``unknown_price``: none of our plans'; ``other_plan``: another plan's)."""
    renewals_billed_wrong: int = 0
    """Periods whose renewal invoice, as last read, bills other money than the plan a change
    put in force at their start (``domain/subscriptions/renewal_checks.py``)."""
    subscriptions_discounted: int = 0
    """Live subscriptions Stripe bills less than their price, as last read: a discount
    (coupon) redeemed at Stripe, never by us (``domain/billing/discounts.py``)."""


OFF_PLAN_KINDS = ("unknown_price", "other_plan")
"""The kinds of ``billing_subscriptions_off_plan``, each always exported (0 when none)."""


class SystemCollector(Collector):
    """Queue depth, scheduled changes by state, the oldest due change's age, failed commands
    and the Stripe budget's shared figures, read at scrape time."""

    def __init__(
        self,
        *,
        clock: Clock,
        read_queue_depths: Callable[[], Mapping[str, int]],
        read_database: Callable[[datetime], DatabaseFigures],
        budget: RateBudget | None,
        read_heartbeats: Callable[[], Sequence[Silence]] = list,
    ) -> None:
        """``budget``: the shared Stripe budget, ``None`` when calls are not metered;
        ``read_heartbeats``: how long each long-running loop has been silent."""
        self._clock = clock
        self._read_queue_depths = read_queue_depths
        self._read_database = read_database
        self._budget = budget
        self._read_heartbeats = read_heartbeats

    def describe(self) -> list[Metric]:
        # Nothing read at registration: the families are computed at each scrape.
        return []

    def collect(self) -> Iterator[Metric]:
        readable = GaugeMetricFamily(
            "billing_collector_up",
            "Whether beat could read this part of the system's gauges at this scrape (1) or "
            "not (0: its gauges are missing from the scrape; see beat's log).",
            labels=["part"],
        )
        parts = {
            "queues": self._queues,
            "database": self._database,
            "stripe_budget": self._stripe_budget,
            "heartbeats": self._heartbeats,
        }
        for name, part in parts.items():
            try:
                families = part()
            except Exception:
                logger.warning("metrics: could not read the %s", name, exc_info=True)
                readable.add_metric([name], 0)
                continue
            readable.add_metric([name], 1)
            yield from families
        yield readable

    def _queues(self) -> list[Metric]:
        depth = GaugeMetricFamily(
            "billing_queue_depth",
            "Messages waiting in each queue (every priority list added up).",
            labels=["queue"],
        )
        for queue, count in self._read_queue_depths().items():
            depth.add_metric([queue], count)
        return [depth]

    def _database(self) -> list[Metric]:
        now = self._clock.now()
        figures = self._read_database(now)
        changes = GaugeMetricFamily(
            "billing_scheduled_changes",
            "Plan changes waiting or being made, by state (finished ones are not counted).",
            labels=["state"],
        )
        for state in (state for state in ChangeState if state.is_pending):
            changes.add_metric([state.value], figures.changes_by_state.get(state.value, 0))
        age = GaugeMetricFamily(
            "billing_oldest_due_change_age_seconds",
            "Age of the oldest plan change that is due and not made: a change at the period's "
            "end counts from when it should be made at Stripe (its boundary less "
            "BILLING_PERIOD_END_LEAD_SECONDS) until it is staged, then from its boundary until "
            "it takes effect; an immediate one from its request (0 when none).",
            value=_age(now, figures.oldest_due_change),
        )
        failed_commands = GaugeMetricFamily(
            "billing_failed_commands",
            "Failed commands waiting for an operator (billing-worker commands failed); "
            "rejected ones (the callers' mistakes) are not counted here.",
            value=figures.failed_commands,
        )
        rejected_commands = GaugeMetricFamily(
            "billing_rejected_commands",
            "Rejected commands in the command log: the callers' mistakes, kept "
            "BILLING_REJECTED_COMMAND_RETENTION_DAYS, for no operator to act on "
            "(billing-worker commands rejected; by type and reason: billing_command_errors).",
            value=figures.rejected_commands,
        )
        deliveries = GaugeMetricFamily(
            "billing_webhook_deliveries",
            "Webhook deliveries by state, succeeded ones not counted (failed: given up, or "
            "abandoned with their endpoint; replayable).",
            labels=["state"],
        )
        for delivery_state in (s for s in DeliveryState if s is not DeliveryState.SUCCEEDED):
            deliveries.add_metric(
                [delivery_state.value],
                figures.deliveries_by_state.get(delivery_state.value, 0),
            )
        endpoints = GaugeMetricFamily(
            "billing_webhook_endpoints",
            "Webhook endpoints by state (disabled: by an operator, or after a delivery failed "
            "for its whole retry budget).",
            labels=["state"],
        )
        for endpoint_state in EndpointState:
            endpoints.add_metric(
                [endpoint_state.value],
                figures.endpoints_by_state.get(endpoint_state.value, 0),
            )
        events = GaugeMetricFamily(
            "billing_events_unpublished",
            "Events in the outbox not yet published to the stream and to webhooks.",
            value=figures.unpublished_events,
        )
        pending_accounts = GaugeMetricFamily(
            "billing_pending_accounts",
            "Billing accounts `pending`: opened online and not yet registered with Stripe.",
            value=figures.pending_accounts,
        )
        pending_age = GaugeMetricFamily(
            "billing_oldest_pending_account_age_seconds",
            "How long the oldest `pending` billing account has been waiting for its "
            "registration since it was opened (0 when none); beat sends its registration "
            "again every BILLING_PENDING_ACCOUNT_REDRIVE_AFTER_SECONDS.",
            value=_age(now, figures.oldest_pending_account),
        )
        off_plan = GaugeMetricFamily(
            "billing_subscriptions_off_plan",
            "Live subscriptions that Stripe bills, as last read, at a price that is not their "
            "plan's here (set in Stripe's dashboard, say), by kind: unknown_price (none of our "
            "plans' prices) or other_plan (another plan's). A change being made or staged at "
            "Stripe is not counted. Back to 0 once the price or the plan is put right and the "
            "subscription read again (webhook, reconciliation sweep, `stripe sync`).",
            labels=["kind"],
        )
        for kind in OFF_PLAN_KINDS:
            off_plan.add_metric([kind], figures.subscriptions_off_plan.get(kind, 0))
        billed_wrong = GaugeMetricFamily(
            "billing_renewals_billed_wrong",
            "Periods that a plan change at the period's end put on a plan and whose renewal "
            "invoice at Stripe, as last read, bills other money net (a write that reached "
            "Stripe after it renewed, uncorrected). Beat's reconciliation sweep reads each "
            "renewal shortly after its boundary and every few minutes while it is wrong: back "
            "to 0 once the period is corrected at Stripe (`stripe drift` names each one).",
            value=figures.renewals_billed_wrong,
        )
        discounted = GaugeMetricFamily(
            "billing_subscriptions_discounted",
            "Live subscriptions Stripe bills less than their plan's price, as last read: a "
            "discount (a coupon) redeemed at Stripe, which we never apply. What the customer "
            "pays is not the plan's price: `stripe drift` names each one with the money it "
            "takes (`discount_at_stripe`).",
            value=figures.subscriptions_discounted,
        )
        return [
            changes,
            age,
            off_plan,
            billed_wrong,
            discounted,
            failed_commands,
            rejected_commands,
            deliveries,
            endpoints,
            events,
            pending_accounts,
            pending_age,
        ]

    def _heartbeats(self) -> list[Metric]:
        # Judged on Redis's clock, where they were recorded (adapters/messaging/heartbeats.py),
        # never on the application's shiftable one.
        seconds = GaugeMetricFamily(
            "billing_loop_silence_seconds",
            "How long each long-running loop has not beaten, on Redis's clock: a worker "
            "node's consumer (consumer:NODE, a message through its own queue), beat "
            "(beat:HOST), beat's failover watch (failover-watch:HOST), each sweep "
            "(sweep:NAME, its successes), each API process's result listener "
            "(result-listener:HOST:PID).",
            labels=["loop"],
        )
        limit = GaugeMetricFamily(
            "billing_loop_silence_limit_seconds",
            "How long each loop may be silent: BILLING_LOOP_SILENCE_SECONDS, or two of its "
            "intervals when it beats less often (a sweep run every hour).",
            labels=["loop"],
        )
        silent = GaugeMetricFamily(
            "billing_loop_silent",
            "1 when a loop has been silent past its limit (alert BillingLoopSilent), else 0.",
            labels=["loop"],
        )
        for silence in self._read_heartbeats():
            seconds.add_metric([silence.loop], silence.seconds)
            limit.add_metric([silence.loop], silence.limit)
            silent.add_metric([silence.loop], 1.0 if silence.silent else 0.0)
        return [seconds, limit, silent]

    def _stripe_budget(self) -> list[Metric]:
        budget = self._budget
        if budget is None:
            return []
        usage = budget.usage()
        families: dict[str, tuple[str, Any]] = {
            "billing_stripe_budget_rate": (
                "Calls per second the shared budget allows now (below the configured rate "
                "after 429s).",
                lambda kind: kind.effective_rate,
            ),
            "billing_stripe_budget_configured_rate": (
                "The configured calls per second.",
                lambda kind: kind.configured_rate,
            ),
            "billing_stripe_budget_waiting": (
                "Calls sleeping for their token now, in every process.",
                lambda kind: kind.waiting,
            ),
            "billing_stripe_budget_backlog_seconds": (
                "How far ahead of now the budget's pace is booked.",
                lambda kind: kind.backlog_seconds,
            ),
        }
        metrics: list[Metric] = []
        for name, (documentation, figure) in families.items():
            family = GaugeMetricFamily(name, documentation, labels=["kind"])
            for kind, figures in usage.kinds.items():
                family.add_metric([kind.value], float(figure(figures)))
            metrics.append(family)
        return metrics


def _age(now: datetime, oldest: datetime | None) -> float:
    if oldest is None:
        return 0.0
    if oldest.tzinfo is None:  # SQLite hands naive UTC back through a plain aggregate
        from datetime import UTC

        oldest = oldest.replace(tzinfo=UTC)
    return max(0.0, (now - oldest).total_seconds())
