"""The gauges of the whole system, computed when beat's exporter is scraped.

They describe shared state (Redis queues, the database, the Stripe budget kept in Redis), so
one process computes them, whatever the number of workers: beat, of which one runs. A part
that cannot be read (the database down) is left out of that scrape and logged; the others
are still served.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

import redis
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from domain.billing import BillingAccountState
from domain.messages import CommandStatus
from domain.ports import Clock
from domain.rate_budget import RateBudget
from domain.scheduled_changes import ChangeKind, ChangeState
from domain.webhooks import DeliveryState, EndpointState
from worker.settings import Settings

logger = logging.getLogger(__name__)

PRIORITY_SEPARATOR = "\x06\x16"
"""How kombu's Redis transport names a queue's list for a priority step other than 0."""


def queue_lists(queue: str, priority_steps: list[int]) -> list[str]:
    """The Redis lists holding ``queue``'s messages, one per priority step."""
    return [queue if step == 0 else f"{queue}{PRIORITY_SEPARATOR}{step}" for step in priority_steps]


class SystemCollector(Collector):
    """Queue depth, scheduled changes by state, the oldest due change's age, failed commands
    and the Stripe budget's shared figures, read at scrape time."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    @cached_property
    def _redis(self) -> redis.Redis:
        return redis.Redis.from_url(self._settings.resolved_redis_url(), socket_timeout=2)

    @cached_property
    def _sessions(self) -> sessionmaker[Session]:
        from worker.db.engine import session_factory

        return session_factory(self._settings.resolved_database_url())

    @cached_property
    def _clock(self) -> Clock:
        from worker.bootstrap import build_clock

        return build_clock(self._settings)

    @cached_property
    def _budget(self) -> RateBudget | None:
        from worker.bootstrap import budget_for
        from worker.provider.rate_budget import UnmeteredBudget

        budget = budget_for(self._settings)
        return None if isinstance(budget, UnmeteredBudget) else budget

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
        from worker.celery_app import CONSUMED_QUEUES, app

        steps = list(app.conf.broker_transport_options.get("priority_steps") or [0])
        depth = GaugeMetricFamily(
            "billing_queue_depth",
            "Messages waiting in each queue (every priority list added up).",
            labels=["queue"],
        )
        pipe = self._redis.pipeline(transaction=False)
        for queue in CONSUMED_QUEUES:
            for name in queue_lists(queue, steps):
                pipe.llen(name)
        lengths = iter(pipe.execute())
        for queue in CONSUMED_QUEUES:
            depth.add_metric([queue], sum(int(next(lengths)) for _ in steps))
        return [depth]

    def _database(self) -> list[Metric]:
        from worker.db.models import (
            BillingAccountRow,
            CommandRow,
            EventRow,
            ScheduledChangeRow,
            WebhookDeliveryRow,
            WebhookEndpointRow,
        )

        now = self._clock.now()
        pending = [state.value for state in ChangeState if state.is_pending]
        unstaged = [ChangeState.SCHEDULED.value, ChangeState.APPLYING.value]
        with self._sessions() as session:
            by_state: dict[str, int] = {
                str(state): int(count)
                for state, count in session.execute(
                    select(ScheduledChangeRow.state, func.count()).group_by(
                        ScheduledChangeRow.state
                    )
                ).all()
            }
            row = ScheduledChangeRow
            lead = timedelta(seconds=self._settings.period_end_lead_seconds)
            # Due: a change at the period's end once it should be made at Stripe (the lead
            # before its boundary) and until it is staged; any other once it is in effect.
            due_at_stripe: datetime | None = session.scalar(
                select(func.min(row.effective_at)).where(
                    row.state.in_(unstaged),
                    row.kind == ChangeKind.END_OF_PERIOD.value,
                    row.effective_at <= now + lead,
                )
            )
            due_here: datetime | None = session.scalar(
                select(func.min(row.effective_at)).where(
                    row.state.in_(pending),
                    row.kind == ChangeKind.IMMEDIATE.value,
                    row.effective_at <= now,
                )
            )
            staged_past: datetime | None = session.scalar(
                select(func.min(row.effective_at)).where(
                    row.state == ChangeState.STAGED.value, row.effective_at <= now
                )
            )
            candidates = [
                moment
                for moment in (
                    None if due_at_stripe is None else due_at_stripe - lead,
                    due_here,
                    staged_past,
                )
                if moment is not None
            ]
            oldest_due = min(candidates) if candidates else None
            failed, rejected = (
                int(
                    session.scalar(
                        select(func.count())
                        .select_from(CommandRow)
                        .where(CommandRow.status == status.value)
                    )
                    or 0
                )
                for status in (CommandStatus.FAILED, CommandStatus.REJECTED)
            )
            deliveries_by_state = _count_by(session, WebhookDeliveryRow.state)
            endpoints_by_state = _count_by(session, WebhookEndpointRow.state)
            unpublished = int(
                session.scalar(
                    select(func.count())
                    .select_from(EventRow)
                    .where(EventRow.published_at.is_(None))
                )
                or 0
            )
            pending_count, oldest_pending = session.execute(
                select(func.count(), func.min(BillingAccountRow.created_at)).where(
                    BillingAccountRow.state == BillingAccountState.PENDING.value
                )
            ).one()
        changes = GaugeMetricFamily(
            "billing_scheduled_changes", "Plan changes by state.", labels=["state"]
        )
        for state in ChangeState:
            changes.add_metric([state.value], by_state.get(state.value, 0))
        age = GaugeMetricFamily(
            "billing_oldest_due_change_age_seconds",
            "Age of the oldest plan change that is due and not made: a change at the period's "
            "end counts from when it should be made at Stripe (its boundary less "
            "BILLING_PERIOD_END_LEAD_SECONDS) until it is staged, then from its boundary until "
            "it takes effect; an immediate one from its request (0 when none).",
            value=_age(now, oldest_due),
        )
        failed_commands = GaugeMetricFamily(
            "billing_failed_commands",
            "Failed commands waiting for an operator (billing-worker commands failed); "
            "rejected ones (the callers' mistakes) are not counted here.",
            value=failed,
        )
        rejected_commands = GaugeMetricFamily(
            "billing_rejected_commands",
            "Rejected commands in the command log: the callers' mistakes, kept "
            "BILLING_REJECTED_COMMAND_RETENTION_DAYS, for no operator to act on "
            "(billing-worker commands rejected; by type and reason: billing_command_errors).",
            value=rejected,
        )
        deliveries = GaugeMetricFamily(
            "billing_webhook_deliveries",
            "Webhook deliveries by state (failed: given up, or abandoned with their endpoint; "
            "replayable).",
            labels=["state"],
        )
        for delivery_state in DeliveryState:
            deliveries.add_metric(
                [delivery_state.value], deliveries_by_state.get(delivery_state.value, 0)
            )
        endpoints = GaugeMetricFamily(
            "billing_webhook_endpoints",
            "Webhook endpoints by state (disabled: by an operator, or after a delivery failed "
            "for its whole retry budget).",
            labels=["state"],
        )
        for endpoint_state in EndpointState:
            endpoints.add_metric(
                [endpoint_state.value], endpoints_by_state.get(endpoint_state.value, 0)
            )
        events = GaugeMetricFamily(
            "billing_events_unpublished",
            "Events in the outbox not yet published to the stream and to webhooks.",
            value=unpublished,
        )
        pending_accounts = GaugeMetricFamily(
            "billing_pending_accounts",
            "Billing accounts `pending`: opened online and not yet registered with Stripe.",
            value=int(pending_count or 0),
        )
        pending_age = GaugeMetricFamily(
            "billing_oldest_pending_account_age_seconds",
            "How long the oldest `pending` billing account has been waiting for its "
            "registration since it was opened (0 when none); beat sends its registration "
            "again every BILLING_PENDING_ACCOUNT_REDRIVE_AFTER_SECONDS.",
            value=_age(now, oldest_pending),
        )
        return [
            changes,
            age,
            failed_commands,
            rejected_commands,
            deliveries,
            endpoints,
            events,
            pending_accounts,
            pending_age,
        ]

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


def _count_by(session: Session, column: Any) -> dict[str, int]:
    return {
        str(value): int(count)
        for value, count in session.execute(select(column, func.count()).group_by(column)).all()
    }


def _age(now: datetime, oldest: datetime | None) -> float:
    if oldest is None:
        return 0.0
    if oldest.tzinfo is None:  # SQLite hands naive UTC back through a plain aggregate
        from datetime import UTC

        oldest = oldest.replace(tzinfo=UTC)
    return max(0.0, (now - oldest).total_seconds())
