"""What ``bench scale`` times in its own process, on one database: every beat sweep, the
gauges beat reads at each scrape, the story ``billing-worker accounts show`` reads, the
retention's delete rate, and the bytes a command takes.

Each is a median (sweeps) or a p95 (reads) of runs after a warm-up. Work a sweep leaves
behind is undone before the next run (the due-changes sweep's claims), so every run sees the
same database.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import text, update
from sqlalchemy.orm import Session, sessionmaker

from adapters.db.engine import session_factory
from adapters.db.gauges import SqlSystemFigures
from adapters.db.models import ScheduledChangeRow
from application.handlers.events.relay import relay_events
from application.handlers.events.webhook_deliveries import send_due_deliveries
from application.handlers.operations import failover
from application.handlers.operations.retention import prune_command_log, prune_outbox
from application.handlers.operations.stories import ShowAccount, account_story
from application.handlers.operations.sweeps import (
    publish_due_changes,
    redrive_pending_accounts,
    republish_stalled_commands,
)
from application.requests.sweeps import (
    PruneCommandLog,
    PruneOutbox,
    PublishDueChanges,
    RedrivePendingAccounts,
    RelayEvents,
    RepublishStalledCommands,
    SendDueDeliveries,
)
from domain.messages import AWAITING_DELIVERY
from domain.subscriptions.change_states import ChangeState
from tests.benchmarks.figures import percentile
from tests.benchmarks.scale.rows import account_id, org_id, subscription_id
from tests.support.emulator import EMULATOR_KEY
from tests.support.query_plans import Recording, recorded
from worker.bootstrap import Services, build_services
from worker.settings import Settings

KEEP_A_YEAR = {
    "command_retention_days": 400,
    "failed_command_retention_days": 400,
    "rejected_command_retention_days": 400,
}
"""Retention that keeps the whole seeded year: its sweep looks and finds nothing due."""


@dataclass(frozen=True)
class Timed:
    """Seconds of each run, after the warm-up."""

    runs: list[float]
    result: Any = None

    @property
    def median_ms(self) -> float:
        return 1000 * statistics.median(self.runs)

    @property
    def p95_ms(self) -> float:
        return 1000 * percentile(self.runs, 0.95)


def timed(work: Callable[[], Any], runs: int, before: Callable[[], None] | None = None) -> Timed:
    result: Any = None
    seconds: list[float] = []
    for _ in range(runs + 1):  # the first opens connections and warms caches
        if before is not None:
            before()
        began = time.perf_counter()
        result = work()
        seconds.append(time.perf_counter() - began)
    return Timed(seconds[1:], result)


LIVE_STRIPE: dict[str, Any] = {"stripe_api_key": EMULATOR_KEY, "stripe_rate_per_second": 100.0}
"""Stripe as production has it: a key, so the shared rate budget is on, at live mode's 100
calls a second (a sweep claims what the budget applies before the sweep after next). No
sweep measured here calls Stripe."""


def services_on(database_url: str, redis_url: str, **settings: Any) -> Services:
    return build_services(
        Settings(
            database_url=database_url,
            redis_url=redis_url,
            **{**LIVE_STRIPE, **KEEP_A_YEAR, **settings},
        )
    )


def unclaim_changes(sessions: sessionmaker[Session]) -> Callable[[], None]:
    """Hand the changes the due-changes sweep claimed back (``scheduled``, no lease)."""

    def undo() -> None:
        row = ScheduledChangeRow
        with sessions() as session:
            session.execute(
                update(row)
                .where(row.state == ChangeState.APPLYING.value)
                .values(state=ChangeState.SCHEDULED.value, lease_until=None, claims=0)
            )
            session.commit()

    return undo


def sweeps(database_url: str, redis_url: str, runs: int) -> dict[str, Timed]:
    """One run of each of beat's sweeps, as its task runs it, ``runs`` times."""
    services = services_on(database_url, redis_url)
    sessions = session_factory(database_url)
    lead = timedelta(seconds=services.settings.period_end_lead_seconds)

    def failover_look() -> Any:
        # What the sweep reads once the broker's primary changed: the commands awaiting
        # delivery and the changes claimed in the last minutes.
        since = services.clock.now() - timedelta(minutes=5)
        return failover._republish(services, since, AWAITING_DELIVERY)

    return {
        "due changes": timed(
            lambda: publish_due_changes(PublishDueChanges(), services),
            runs,
            unclaim_changes(sessions),
        ),
        "stalled commands": timed(
            lambda: republish_stalled_commands(RepublishStalledCommands(), services), runs
        ),
        # The routine look: nothing claimed in the last minutes (after a failover it also
        # publishes again what was, a cost of the work, not of the log's size).
        "failover look": timed(failover_look, runs, unclaim_changes(sessions)),
        "event relay": timed(lambda: relay_events(RelayEvents(), services), runs),
        "webhook retries": timed(lambda: send_due_deliveries(SendDueDeliveries(), services), runs),
        "pending accounts": timed(
            lambda: redrive_pending_accounts(RedrivePendingAccounts(), services), runs
        ),
        "retention (nothing due)": timed(
            lambda: (
                prune_command_log(PruneCommandLog(), services).total
                + prune_outbox(PruneOutbox(), services)
            ),
            runs,
        ),
        "gauges (each scrape)": timed(
            lambda: SqlSystemFigures(sessions, lead)(services.clock.now()), runs
        ),
    }


def account_stories(database_url: str, redis_url: str, accounts: int, runs: int) -> Timed:
    """The story ``billing-worker accounts show`` reads from the database (its invoices,
    read from Stripe, left out), of ``runs`` accounts spread over the organizations."""
    services = services_on(database_url, redis_url)
    picks = iter([account_id((n * 7_919) % accounts) for n in range(runs + 1)])
    return timed(lambda: account_story(ShowAccount(next(picks), invoices=False), services), runs)


def retention_rate(database_url: str, redis_url: str) -> tuple[int, float]:
    """Commands one sweep of the retention at its defaults deletes, and the seconds it took
    (the seeded year is 11 months past the 30 days a succeeded command is kept)."""
    services = build_services(
        Settings(database_url=database_url, redis_url=redis_url, **LIVE_STRIPE)
    )
    began = time.perf_counter()
    deleted = prune_command_log(PruneCommandLog(), services).total
    return deleted, time.perf_counter() - began


LOG = ("commands", "provider_calls", "events", "webhook_deliveries")


def bytes_per_command(database_url: str) -> dict[str, float]:
    """The command log's tables and their indexes on disk, per command (PostgreSQL)."""
    sessions = session_factory(database_url)
    with sessions() as session:
        commands = int(session.execute(text("SELECT count(*) FROM commands")).scalar_one())
        sizes = {
            table: int(
                session.execute(text(f"SELECT pg_total_relation_size('{table}')")).scalar_one()
            )
            for table in LOG
        }
        database = int(
            session.execute(text("SELECT pg_database_size(current_database())")).scalar_one()
        )
    return {
        "commands": commands,
        "log_bytes_per_command": sum(sizes.values()) / max(commands, 1),
        **{f"{table}_bytes": size for table, size in sizes.items()},
        "database_bytes": database,
    }


def what_the_hot_paths_send(url: str, redis_url: str) -> Recording:
    """Every statement the hot paths send to ``url``'s database, as they run: each beat
    sweep, the console's stories, lists and search, the gauges, the retention."""
    services: Services = services_on(url, redis_url)
    console = services.console()
    now = services.clock.now()
    with recorded() as recording:
        sweeps(url, redis_url, runs=0)
        account_story(ShowAccount(account_id(7), invoices=False), services)
        console.account_story(org_id(8))
        console.subscription_story(subscription_id(9))
        day = now - timedelta(days=1)
        for status in ("failed", "rejected"):
            console.recent_commands(status=status, updated_since=day, shown=20)
            console.commands(
                statuses=[status],
                command_type=None,
                limit=100,
                after=None,
                updated_since=day,
            )
        console.commands(
            statuses=[status.value for status in AWAITING_DELIVERY] + ["running"],
            command_type=None,
            limit=20,
            after=None,
        )
        console.billing_accounts(state="pending", org_id=None, limit=20, after=None)
        console.search("billing7@scale.example", limit=20)
        console.search(account_id(7), limit=20)
        retention_rate(url, redis_url)
    return recording
