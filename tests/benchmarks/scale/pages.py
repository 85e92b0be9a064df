"""``bench scale``: the console's pages over HTTP, on each database."""

from __future__ import annotations

import time

from sqlalchemy import text

from adapters.db.engine import session_factory
from domain.permissions import Grant, Scope
from tests.benchmarks.figures import Figure, Target, percentile
from tests.benchmarks.harness import (
    BenchContext,
    system,
)
from tests.benchmarks.scale.databases import DAY_ONE, PAGE_MS, Pair
from tests.benchmarks.scale.rows import account_id, org_id, subscription_id

PAGES = (
    ("home", "/console"),
    ("failures", "/console/failures"),
    ("accounts", "/console/accounts"),
    ("account", "/console/accounts/{account}"),
    ("organization", "/console/organizations/{org}"),
    ("subscription", "/console/subscriptions/{subscription}"),
    ("command", "/console/commands/{command}"),
    ("search", "/console/search?q={email}"),
    ("audit", "/console/audit"),
)
CONSOLE = Grant(scopes=frozenset({Scope.OPERATIONS_READ}))


def page_times(
    ctx: BenchContext, name: str, pair: Pair, url: str, organizations: int
) -> dict[str, list[float]]:
    """Each console page ``runs`` times over HTTP, the API on ``url``; each run names
    another account (spread over ``organizations``)."""
    runs = ctx.size(5, 40)
    with session_factory(url)() as session:
        command = session.execute(
            text("SELECT id FROM commands ORDER BY created_at DESC LIMIT 1 OFFSET 10")
        ).scalar_one()
    with system(ctx, name, pair.backend, database_url=url) as stack:
        stack.start_api()
        client = stack.new_client(f"console-{name}", grant=CONSOLE)
        times: dict[str, list[float]] = {page: [] for page, _ in PAGES}
        with stack.http(client) as http:
            for run in range(runs + 1):
                n = (run * 7_919) % organizations
                names = {
                    "account": account_id(n),
                    "org": org_id(n),
                    "subscription": subscription_id(n),
                    "command": command,
                    "email": f"billing{n}@scale.example",
                }
                for page, path in PAGES:
                    began = time.perf_counter()
                    answer = http.get(path.format(**names))
                    took = time.perf_counter() - began
                    if answer.status_code != 200:
                        raise RuntimeError(f"{path.format(**names)}: {answer.status_code}")
                    if run:
                        times[page].append(took)
    return times


def pages(ctx: BenchContext, pair: Pair) -> list[Figure]:
    seeded = page_times(ctx, f"scale-pages-{pair.backend}", pair, pair.seeded, pair.organizations)
    day_one = page_times(
        ctx, f"scale-pages-{pair.backend}-day-one", pair, pair.day_one, DAY_ONE.organizations
    )
    return [
        Figure(
            f"scale.{pair.backend}.page.{page}",
            f"console page {path.split('?')[0]} ({pair.backend}), p95",
            1000 * percentile(seeded[page], 0.95),
            "ms",
            1000 * percentile(day_one[page], 0.95),
            "the same on the day-one database",
            Target("<", PAGE_MS, on="value", text=f"< {PAGE_MS:g} ms"),
            details={"p50_ms": round(1000 * percentile(seeded[page], 0.5), 2)},
        )
        for page, path in PAGES
    ]
