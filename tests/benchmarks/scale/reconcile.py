"""``bench scale``: a full pass of beat's reconciliation, and the drift report, over every
subscription of the seeded database, against a Stripe (the emulator) holding the same
customers and subscriptions, at Stripe's live read rate (100 a second) with the shared budget.

Stripe's side is mirrored from our rows (``/_emulator/bulk/prices`` and
``/_emulator/bulk/subscriptions``): each subscription with its status, price and period. A
row whose period ended since the database was seeded (Stripe would have renewed it) is given
its next period at Stripe, so the pass finds and corrects it, as it would after lost renewal
webhooks. Each figure is the pass's duration beside the floor Stripe's rate sets, the calls
it made ÷ 100 a second: a pass bounded by Stripe's rate, not by our own work, takes no
longer than the floor and a little more (target: within 10 %).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import create_engine, text

from application.handlers.drift.report import drift_report
from application.handlers.provider.reconcile import reconcile_with_stripe
from application.requests.operator_requests import ReportDrift
from application.requests.sweeps import ReconcileWithStripe
from domain.provider.pages import WalkedList
from stripe_emulator import EmulatorAdmin
from tests.benchmarks.figures import Figure, Target
from tests.benchmarks.harness import BenchContext
from tests.benchmarks.scale.databases import FLAT, Pair
from tests.benchmarks.scale.rows import MONTH
from tests.support.emulator import EMULATOR_KEY, start_emulator
from worker.bootstrap import Services, build_services
from worker.settings import Settings

LIVE_READS_PER_SECOND = 100
"""Stripe's live-mode read limit: the emulator's and the budget's rate for the pass."""
READS_PER_RUN = 1_000
"""Reads each run of the sweep is given (beat gives 50 at its defaults: 5/s every 10 s)."""
MIRROR_BATCH = 10_000
"""Rows a request of the bulk seed carries."""
SETTLED_SECONDS = 120
"""A period ending sooner than this after now is given its next one at Stripe: the emulator
refuses to make a subscription whose period is over."""


def reconcile_and_drift(ctx: BenchContext, pair: Pair) -> list[Figure]:
    """A full reconciliation pass over the seeded database's subscriptions, then the drift
    report (without invoices), each against an emulator mirroring the database."""
    tag = pair.backend
    with _mirrored_stripe(ctx, pair.seeded) as (admin, url, mirrored):
        settings = Settings(
            database_url=pair.seeded,
            redis_url=ctx.redis_url(),
            stripe_api_key=EMULATOR_KEY,
            stripe_api_base=url,
            stripe_rate_per_second=float(LIVE_READS_PER_SECOND),
        )
        services = build_services(settings)
        _forget_the_walk(pair.seeded)
        admin.set_rate_limit(LIVE_READS_PER_SECOND)
        admin.clear_requests()
        reconcile = _timed(lambda: _full_pass(services))
        reconcile_calls = _calls(admin)
        admin.clear_requests()
        _forget_the_walk(pair.seeded)
        drift = _timed(
            lambda: Counter(
                finding.kind.value
                for finding in drift_report(ReportDrift(read_invoices=False), services)
            )
        )
        drift_calls = _calls(admin)
    return [
        _figure(
            f"scale.{tag}.reconcile_pass",
            f"beat's reconciliation: a full pass over {mirrored['subscriptions']:,} "
            f"subscriptions at Stripe's live read rate ({tag})",
            reconcile,
            reconcile_calls,
            mirrored,
        ),
        _figure(
            f"scale.{tag}.drift_pass",
            f"the drift report (`stripe drift --skip-invoices`) over {mirrored['subscriptions']:,}"
            f" subscriptions and their customers at Stripe's live read rate ({tag})",
            drift,
            drift_calls,
            mirrored,
        ),
    ]


class _Timed:
    def __init__(self, seconds: float, cpu_seconds: float, result: Any) -> None:
        self.seconds, self.cpu_seconds, self.result = seconds, cpu_seconds, result


def _timed(work: Any) -> _Timed:
    cpu, began = time.process_time(), time.perf_counter()
    result = work()
    return _Timed(time.perf_counter() - began, time.process_time() - cpu, result)


def _figure(
    figure_id: str,
    label: str,
    timed: _Timed,
    requests: tuple[int, int],
    mirrored: dict[str, Any],
) -> Figure:
    requested, refused = requests
    calls = requested - refused
    floor = calls / LIVE_READS_PER_SECOND
    return Figure(
        figure_id,
        label,
        timed.seconds,
        "s",
        floor,
        f"the floor: its {calls:,} Stripe reads ÷ {LIVE_READS_PER_SECOND}/s",
        Target("<=", FLAT, text="within 10 % of the floor: bounded by Stripe's rate"),
        details={
            "stripe_reads": calls,
            "refused_429": refused,
            "our_cpu_seconds": round(timed.cpu_seconds, 1),
            "our_cpu_ms_a_read": round(1000 * timed.cpu_seconds / calls, 2) if calls else None,
            "found": dict(timed.result),
            "mirrored": mirrored,
        },
    )


def _full_pass(services: Services) -> Counter[str]:
    """Runs of the sweep until its walk over Stripe's subscriptions completes a pass."""
    found: Counter[str] = Counter()
    while True:
        found.update(reconcile_with_stripe(ReconcileWithStripe(READS_PER_RUN), services))
        with services.unit_of_work() as uow:
            walk = uow.provider_walks.get(WalkedList.SUBSCRIPTIONS)
        if walk is not None and walk.completed_pass_started_at is not None:
            return found


def _calls(admin: EmulatorAdmin) -> tuple[int, int]:
    """Stripe calls made since the log was cleared, and how many of them Stripe refused with
    429 (each is a read the budget let go too early: the floor counts only those answered)."""
    requests = admin.requests(path_prefix="/v1/")
    return len(requests), sum(request.status == 429 for request in requests)


def _forget_the_walk(url: str) -> None:
    """A pass from the first page: an earlier run's walk is forgotten."""
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text("DELETE FROM provider_walks"))
    finally:
        engine.dispose()


@contextmanager
def _mirrored_stripe(
    ctx: BenchContext, url: str
) -> Iterator[tuple[EmulatorAdmin, str, dict[str, Any]]]:
    """An emulator of its own holding our plans' prices and, for each of our subscriptions,
    its customer and the subscription as our row has it."""
    emulator = start_emulator(ctx.directory("scale-stripe") / "emulator.log", "--rate-limit", "0")
    try:
        with EmulatorAdmin(emulator.url, timeout=600.0) as admin:
            began = time.perf_counter()
            mirrored = _mirror(url, admin)
            mirrored["seconds"] = round(time.perf_counter() - began, 1)
            yield admin, emulator.url, mirrored
    finally:
        emulator.stop()


WHOLE_SECOND_PERIODS = {
    "postgresql": (
        "UPDATE subscriptions SET"
        " current_period_start = date_trunc('second', current_period_start),"
        " current_period_end = date_trunc('second', current_period_end)"
        " WHERE current_period_start <> date_trunc('second', current_period_start)"
        " OR current_period_end <> date_trunc('second', current_period_end)"
    ),
    "sqlite": (
        "UPDATE subscriptions SET"
        " current_period_start = substr(current_period_start, 1, 19) || '.000000',"
        " current_period_end = substr(current_period_end, 1, 19) || '.000000'"
        " WHERE substr(current_period_start, 20) <> '.000000'"
        " OR substr(current_period_end, 20) <> '.000000'"
    ),
}
"""Stripe keeps a period to the second; the seed wrote fractions of one, which every row
would differ by. Our periods are cut to the second first (once: a no-op after)."""


def _mirror(url: str, admin: EmulatorAdmin) -> dict[str, Any]:
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text(WHOLE_SECOND_PERIODS[engine.dialect.name]))
        with engine.connect() as connection:
            plans = connection.execute(
                text(
                    "SELECT provider_price_id, provider_product_id, amount, currency, interval"
                    " FROM plans WHERE provider_price_id IS NOT NULL"
                )
            ).all()
            admin.bulk_prices(
                [
                    {
                        "id": price,
                        "product": product,
                        "unit_amount": amount,
                        "currency": currency,
                        "interval": interval,
                    }
                    for price, product, amount, currency, interval in plans
                ]
            )
            now = admin.now()
            rows = connection.execution_options(stream_results=True, yield_per=MIRROR_BATCH)
            result = rows.execute(
                text(
                    "SELECT id, provider_id, state, billed_price_id, current_period_start,"
                    " current_period_end, created_at FROM subscriptions ORDER BY id"
                )
            )
            made, renewed, batch = 0, 0, []
            for row in result:
                mirrored, moved = _stripe_row(row, now)
                renewed += moved
                batch.append(mirrored)
                if len(batch) == MIRROR_BATCH:
                    made += _seed(admin, batch)
                    batch = []
            if batch:
                made += _seed(admin, batch)
    finally:
        engine.dispose()
    return {"subscriptions": made, "renewed_at_stripe": renewed, "prices": len(plans)}


def _stripe_row(row: Any, now: int) -> tuple[dict[str, Any], bool]:
    """Stripe's copy of one of our subscriptions; and whether its period had to move on."""
    index = int(row.id.removeprefix("sub_scale"))
    assert row.provider_id == f"sub_stripe{index:09d}", row.provider_id
    start, end = _seconds(row.current_period_start), _seconds(row.current_period_end)
    moved = False
    if row.state != "canceled":
        while end < now + SETTLED_SECONDS:
            start, end, moved = end, end + int(MONTH), True
    return {
        "i": index,
        "price": row.billed_price_id,
        "status": row.state,
        "current_period_start": start,
        "current_period_end": end,
        "created": _seconds(row.created_at),
    }, moved


def _seconds(value: datetime | str) -> int:
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())


def _seed(admin: EmulatorAdmin, rows: list[dict[str, Any]]) -> int:
    made = admin.bulk_subscriptions(
        customer_id="cus_scale{i:09d}",
        subscription_id="sub_stripe{i:09d}",
        item_id="si_scale{i:09d}",
        rows=rows,
    )
    return int(made["subscriptions"])
