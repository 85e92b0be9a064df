"""Beat's gauges of accounts stuck pending, read from SQLite and PostgreSQL as beat reads them
at a scrape (``adapters/observability/gauges.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from adapters.clock import SystemClock
from adapters.db.engine import session_factory
from adapters.db.uow import SqlUnitOfWork
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount
from tests.support.records import create_organization
from worker.bootstrap import build_services
from worker.settings import Settings


def gauges(collector: Collector) -> dict[str, float]:
    families: list[Metric] = list(collector.collect())
    return {
        sample.name: sample.value
        for family in families
        for sample in family.samples
        if not sample.labels
    }


def test_beat_counts_pending_accounts_and_the_age_of_the_oldest(
    make_database: Callable[[str], str], redis_server: str
) -> None:
    url = make_database(f"gauges_{uuid.uuid4().hex[:8]}")
    sessions = session_factory(url)
    collector = build_services(
        Settings(database_url=url, redis_url=f"{redis_server}/12")
    ).system_collector()
    assert gauges(collector)["billing_pending_accounts"] == 0
    assert gauges(collector)["billing_oldest_pending_account_age_seconds"] == 0
    now = SystemClock().now()
    with SqlUnitOfWork(sessions) as uow:
        for hours, offline in ((2, False), (1, False), (5, True)):
            org = create_organization(sessions, SystemClock(), name=f"o-{uuid.uuid4().hex[:8]}")
            uow.billing_accounts.add(
                BillingAccount.open(
                    f"ba_{uuid.uuid4().hex[:8]}",
                    org,
                    BillingDetails(name="Acme", email="billing@acme.example"),
                    offline=offline,
                    default_currency="usd",
                    now=now - timedelta(hours=hours),
                )
            )
        uow.commit()

    read = gauges(collector)

    assert read["billing_pending_accounts"] == 2
    assert 7200 <= read["billing_oldest_pending_account_age_seconds"] < 7200 + 60
