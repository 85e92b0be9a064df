"""What ``billing-worker up`` prints once the stack is ready: where everything is, the demo
data and its ids, the demo client's credentials, and commands to try."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from worker.local.seed import (
    DEMO_BILLING_ACCOUNT_ID,
    DEMO_DATA,
    DEMO_ORG_ID,
    DEMO_PLANS,
    DEMO_SUBSCRIPTION_ID,
    DEMO_UNBILLED_ORG_ID,
    DEMO_USER_ID,
    DemoCredentials,
    DemoRecord,
)
from worker.settings import masked_url


@dataclass(frozen=True)
class Started:
    """What ``up`` started, as the banner names it."""

    elapsed: str
    api_url: str
    flower_url: str
    flower_user: str
    flower_password: str
    redis_url: str
    redis_password_file: Path | None
    """Where the embedded Redis's password is kept; ``None`` for a Redis of
    ``BILLING_REDIS_URL``."""
    database_url: str
    stripe_emulator_url: str | None
    logs: Path
    metrics_urls: dict[str, str]
    credentials: DemoCredentials
    demo_billing: bool
    """Whether the demo's billing account and subscription exist (the emulator runs)."""
    clock_offset_seconds: float | None
    """How far the application clock is ahead; ``None`` when it cannot move (real Stripe)."""
    redis_ha: dict[str, Any] | None = None
    """``up --ha``'s topology (:meth:`worker.local.sentinel.SentinelTopology.describe`, with
    the primary's name); ``None`` for one Redis."""


def demo_records(with_billing: bool) -> list[DemoRecord]:
    """The demo data there is: without the emulator, none of what registers with Stripe."""
    return [record for record in DEMO_DATA if with_billing or not record.needs_stripe]


def demo_table(records: Sequence[DemoRecord], indent: str = "  ") -> list[str]:
    """The demo data as rows under a header: kind, id, what it is."""
    kinds = max(len("KIND"), *(len(record.kind) for record in records))
    ids = max(len("ID"), *(len(record.id) for record in records))
    rows = [("KIND", "ID", "WHAT"), *((r.kind, r.id, r.what) for r in records)]
    return [f"{indent}{kind:<{kinds}}  {id_:<{ids}}  {what}" for kind, id_, what in rows]


def clock_line(offset_seconds: float | None, real_now: datetime | None = None) -> str:
    """The banner's clock: real time, or how far ahead it is and the shifted now every
    process of the stack uses."""
    if offset_seconds is None:
        return "real time (the clock moves only with the Stripe emulator)"
    if not offset_seconds:
        return "real time (billing-worker clock advance 31d --reason WHY | show | reset)"
    shifted = (real_now or datetime.now(UTC)) + timedelta(seconds=offset_seconds)
    return (
        f"{offset_seconds / 86400:.2f} days ahead of real time: {shifted:%Y-%m-%d %H:%M} UTC "
        "for every process and the Stripe emulator, kept from an earlier run "
        "(billing-worker clock show | reset)"
    )


def redis_password_where(started: Started) -> str:
    """Where Redis's password is, since the banner masks it."""
    if started.redis_password_file is None:
        return "its password is BILLING_REDIS_URL's"
    return f"password in {started.redis_password_file}; the whole URL in stack.json"


def redis_lines(started: Started) -> list[str]:
    """The banner's Redis: one server, or ``up --ha``'s primary, replica and sentinels."""
    ha = started.redis_ha
    if ha is None:
        return [
            f"  Redis          {masked_url(started.redis_url)}   ({redis_password_where(started)})"
        ]
    members = topology_members(ha)
    servers, sentinels = members[:2], [m.split(" (", 1)[0] for m in members[2:]]
    primary = ha["servers"][ha["primary"]]
    return [
        f"  Redis          Sentinel {ha['master_name']!r}: " + ", ".join(servers),
        f"                 sentinels {', '.join(sentinels)}   (passwords in "
        f"{started.redis_password_file}; all in stack.json)",
        f"                 try: kill -9 {primary['pid']} (the primary), then `billing-worker "
        "status`: the replica takes over within seconds",
    ]


def topology_members(ha: dict[str, Any]) -> list[str]:
    """``primary redis-1 :port (pid N)``, the replica, each sentinel: what the banner and
    ``billing-worker status`` name."""
    members = [
        f"{'primary' if name == ha.get('primary') else 'replica'} {name} "
        f":{server['port']} (pid {server['pid']})"
        for name, server in sorted(ha["servers"].items(), key=lambda i: i[0] != ha.get("primary"))
    ]
    members += [f"{name} :{s['port']} (pid {s['pid']})" for name, s in ha["sentinels"].items()]
    return members


def banner(started: Started) -> list[str]:
    """The lines ``up`` prints, blank lines included."""
    s = started
    client_id, secret = s.credentials.client_id, s.credentials.client_secret
    api = s.api_url
    curl = f"curl -u {client_id}:{secret} -X POST -H 'Content-Type: application/json'"
    metrics = s.metrics_urls
    lines = [
        f"billing-worker is ready ({s.elapsed})",
        "",
        f"  API            {api}   (docs: {api}/docs)",
        f"  Contracts      {api}/openapi.json   {api}/asyncapi.json (queues, events)",
        f"  Console        {api}/console   (in a browser; sign in as the client below)",
        f"  Flower         {s.flower_url}   user {s.flower_user}, password {s.flower_password}",
        *redis_lines(s),
        f"  Database       {masked_url(s.database_url)}",
        f"  Stripe         {s.stripe_emulator_url or 'api.stripe.com (BILLING_STRIPE_API_KEY)'}",
        f"  Clock          {clock_line(s.clock_offset_seconds)}",
        f"  Logs           {s.logs}",
        f"  Metrics        {metrics['api']}   {metrics['worker']} (worker)   "
        f"{metrics['beat']} (beat)",
        f"  Client         id {client_id}   secret {secret}",
        "",
        "Demo data (`billing-worker demo` lists it again):",
        *demo_table(demo_records(s.demo_billing)),
        "",
        "Try it:",
        f"  {curl} -d '{{}}' {api}/v1beta1/users/{DEMO_USER_ID}/enable",
        "",
        f"Create a billing account for {DEMO_UNBILLED_ORG_ID} at Stripe "
        '(with "offline": true, not at Stripe):',
        f'  {curl} -H \'Idempotency-Key: acme-1\' -d \'{{"body": {{"name": "Acme Ltd", '
        '"email": "billing@acme.example", "address": {"country": "GB"}, '
        '"tax_data": [{"type": "vat", "id": "GB123456789"}]}, "offline": false}\' '
        f"{api}/v1beta1/organizations/{DEMO_UNBILLED_ORG_ID}/billing",
        "",
    ]
    if s.demo_billing:
        change = (
            f"{api}/v1beta1/organizations/{DEMO_ORG_ID}/billing/"
            f"{DEMO_BILLING_ACCOUNT_ID}/subscriptions/{DEMO_SUBSCRIPTION_ID}/change"
        )
        lines += [
            f"Change the demo subscription ({DEMO_SUBSCRIPTION_ID}, on plan {DEMO_PLANS[0].name}):",
            f'  {curl} -d \'{{"plan_change": {{"plan": "team", "immediate": false}}}}\' {change}',
            f"  billing-worker subscriptions show {DEMO_SUBSCRIPTION_ID}",
            '  billing-worker clock advance 31d --reason "see it applied"   # within seconds',
            "",
            "Receive events (signed webhooks; the receiver is examples/webhook_receiver.py):",
            "  billing-worker webhooks add http://127.0.0.1:9999/hook   # prints its secret",
            "  WEBHOOK_SECRET=whsec_... python examples/webhook_receiver.py 9999",
            "",
            "The period-end burst, drained at Stripe's pace (25 calls a second):",
            "  billing-worker subscriptions seed-period-end 2000",
            '  billing-worker clock advance 31d --reason "burst" && billing-worker stripe budget',
            "",
        ]
    lines += [
        "Start over: billing-worker up --fresh (wipes this data directory's database, Redis "
        "data, emulator state and clock).",
        "Ctrl-C stops everything.",
    ]
    return lines
