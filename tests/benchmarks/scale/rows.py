"""A year of a production deployment's rows, drawn from a seed: what ``seed`` loads.

Each generator yields one table's rows as tuples of plain values in :data:`COLUMNS` order
(strings, integers, ``None``), timestamps already written as the database stores them, so a
loader streams them without an ORM. Everything hangs together as the system writes it: an
organization ``i`` has the billing account ``i`` and the subscription ``i``; a command names
accounts and subscriptions that exist, its provider calls and events carry its id, and the
shapes of payloads, results, errors and event documents are those a real stack records.

The mix of a year (issue 46): mostly enable-user commands and plan changes, 97.5 %
succeeded, 1.5 % rejected, 1 % failed, 4 % retried before their end; one provider call per
Stripe-bound attempt; an event per succeeded change; a webhook delivery per event of the last
30 days (the retention of succeeded deliveries).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

Row = tuple[str | int | float | None, ...]
Stamp = Callable[[float], str]

YEAR = 366 * 86_400.0
MONTH = 30 * 86_400.0
PLANS = (
    ("plan_starter", "starter", 900),
    ("plan_team", "team", 2900),
    ("plan_business", "business", 9900),
    ("plan_starter_yearly", "starter-yearly", 9000),
    ("plan_team_yearly", "team-yearly", 29000),
    ("plan_enterprise", "enterprise", 49900),
)
ENDPOINTS = ("we_scale_crm", "we_scale_ledger")
CLIENTS = tuple(f"cli_scale_{n:02d}" for n in range(20))


def _columns(names: str) -> tuple[str, ...]:
    return tuple(names.split())


COLUMNS: dict[str, tuple[str, ...]] = {
    "plans": _columns(
        "id name title interval amount currency active provider provider_product_id "
        "provider_price_id created_at updated_at"
    ),
    "organizations": _columns("id name title metadata state avatar created_at updated_at"),
    "users": _columns("id email name state created_at updated_at"),
    "billing_accounts": _columns(
        "id org_id name email phone address currency tax_data metadata state provider "
        "provider_id registration_key registration_started_at created_at updated_at "
        "customer_deleted_at synced_at"
    ),
    "subscriptions": _columns(
        "id billing_account_id plan_id state provider provider_id current_period_start "
        "current_period_end created_at updated_at provider_item_id cancel_at synced_at "
        "billed_price_id"
    ),
    "scheduled_changes": _columns(
        "id subscription_id from_plan_id target_plan_id kind effective_at state reason "
        "proration_behavior command_id claims lease_until applied_at apply_lag_seconds "
        "first_sent_at staged_period_end created_at updated_at"
    ),
    "commands": _columns(
        "id type status source payload attempts result error retries client_id "
        "idempotency_key request_fingerprint fingerprint created_at updated_at published_at "
        "finished_at"
    ),
    "provider_calls": _columns(
        "id command_id operation subject idempotency_key attempt outcome error started_at "
        "duration_ms"
    ),
    "events": _columns(
        "sequence id type version subject_key command_id occurred_at document published_at"
    ),
    "webhook_endpoints": _columns(
        "id url event_types secret state description created_at updated_at"
    ),
    "webhook_deliveries": _columns(
        "id event_id event_type event_sequence subject_key endpoint_id state next_attempt_at "
        "attempts claims first_attempt_at last_attempt_at last_status delivered_at history "
        "created_at updated_at"
    ),
}
"""The tables the seed fills, in load order (a row's references are loaded before it)."""


@dataclass(frozen=True)
class Size:
    """How much a seeded database holds (issue 46: PostgreSQL's, SQLite at a tenth)."""

    commands: int = 10_000_000
    organizations: int = 1_000_000
    changes: int = 1_000_000
    due_changes: int = 1_000
    scheduled_changes: int = 40_000
    """Changes waiting for a period end in the next 30 days, besides the due ones."""

    def tenth(self) -> Size:
        return Size(
            self.commands // 10,
            self.organizations // 10,
            self.changes // 10,
            self.due_changes,
            self.scheduled_changes // 10,
        )

    def scaled(self, commands: int) -> Size:
        """This size's proportions at ``commands`` commands."""
        ratio = commands / self.commands
        return Size(
            commands,
            max(1_000, int(self.organizations * ratio)),
            max(1_000, int(self.changes * ratio)),
            min(self.due_changes, max(10, int(self.changes * ratio) // 100)),
            max(10, int(self.scheduled_changes * ratio)),
        )


def stamp_for(dialect: str, now: float) -> Stamp:
    """Writes ``now - seconds_ago`` as ``dialect`` stores a UTC timestamp (SQLite compares
    the text: the exact form SQLAlchemy writes)."""
    zone = "+00" if dialect == "postgresql" else ""

    def stamp(seconds_ago: float) -> str:
        moment = datetime.fromtimestamp(now - seconds_ago, UTC)
        return moment.strftime("%Y-%m-%d %H:%M:%S.%f") + zone

    return stamp


def _hex(rng: random.Random, digits: int = 16) -> str:
    return f"{rng.getrandbits(4 * digits):0{digits}x}"


def _uuid(rng: random.Random) -> str:
    h = _hex(rng, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


def org_id(i: int) -> str:
    return f"org_scale{i:09d}"


def account_id(i: int) -> str:
    return f"ba_scale{i:09d}"


def subscription_id(i: int) -> str:
    return f"sub_scale{i:09d}"


def user_id(i: int) -> str:
    return f"usr_scale{i:09d}"


def plans(stamp: Stamp) -> Iterator[Row]:
    for plan_id, name, amount in PLANS:
        yearly = name.endswith("yearly")
        yield (
            plan_id, name, name.title(), "year" if yearly else "month", amount, "usd", True,
            "stripe", f"prod_{name}", f"price_{name}", stamp(YEAR + 86_400), stamp(YEAR),
        )  # fmt: skip


def organizations(size: Size, stamp: Stamp) -> Iterator[Row]:
    for i in range(size.organizations):
        created = stamp(YEAR * (1 - i / size.organizations) + 3_600)
        yield (org_id(i), f"org-{i}", f"Organization {i}", "{}", "enabled", None, created, created)


def users(size: Size, stamp: Stamp) -> Iterator[Row]:
    for i in range(size.organizations):
        created = stamp(YEAR * (1 - i / size.organizations) + 3_600)
        state = "disabled" if i % 50 == 0 else "enabled"
        yield (user_id(i), f"user{i}@scale.example", f"User {i}", state, created, created)


ADDRESS = (
    '{"line1": "1 Main St", "line2": "", "city": "Springfield", "state": "", '
    '"postal_code": "12345", "country": "US"}'
)


def billing_accounts(size: Size, stamp: Stamp, rng: random.Random) -> Iterator[Row]:
    for i in range(size.organizations):
        created = stamp(YEAR * (1 - i / size.organizations) + 1_800)
        yield (
            account_id(i), org_id(i), f"Organization {i} Ltd", f"billing{i}@scale.example", "",
            ADDRESS, "usd", "[]", "{}", "active", "stripe", f"cus_scale{i:09d}",
            f"{account_id(i)}:register", created, created, created, None,
            stamp(rng.random() * 86_400),
        )  # fmt: skip


def subscriptions(size: Size, stamp: Stamp, rng: random.Random) -> Iterator[Row]:
    for i in range(size.organizations):
        plan = PLANS[i % 3]
        created = stamp(YEAR * (1 - i / size.organizations) + 1_000)
        into_period = rng.random() * MONTH
        draw = rng.random()
        state = "canceled" if draw < 0.06 else "past_due" if draw < 0.07 else "active"
        # One in a thousand billed at another price, as the drift report finds them.
        billed = f"price_{PLANS[(i + 1) % 3][1]}" if i % 1000 == 7 else f"price_{plan[1]}"
        yield (
            subscription_id(i), account_id(i), plan[0], state, "stripe", f"sub_stripe{i:09d}",
            stamp(into_period), stamp(into_period - MONTH), created, stamp(into_period),
            f"si_scale{i:09d}", None, stamp(rng.random() * 86_400), billed,
        )  # fmt: skip


def scheduled_changes(size: Size, stamp: Stamp, rng: random.Random) -> Iterator[Row]:
    """The due ones first (a pending change per subscription, on distinct ones), then those
    waiting for a period end, then a year of history: applied, canceled, skipped."""
    pending = size.due_changes + size.scheduled_changes
    for j in range(size.changes):
        subscription = j % size.organizations
        source, target = PLANS[subscription % 3][0], PLANS[(subscription + 1) % 3][0]
        if j < pending:
            due = j < size.due_changes
            effective = 60.0 if due else -(7_200 + rng.random() * MONTH)
            yield (
                f"chg_scale{j:09d}", subscription_id(subscription), source, target,
                "end_of_period", stamp(effective), "scheduled", None, "create_prorations",
                None, 0, None, None, None, None, None, stamp(effective + MONTH / 2),
                stamp(effective + MONTH / 2),
            )  # fmt: skip
            continue
        ago = rng.random() * YEAR
        draw = rng.random()
        immediate = draw < 0.5
        state, reason = (
            ("applied", None)
            if draw < 0.85
            else ("canceled", "replaced")
            if draw < 0.95
            else ("skipped", "subscription_canceled")
        )
        applied = stamp(ago - 0.4) if state == "applied" else None
        yield (
            f"chg_scale{j:09d}", subscription_id(subscription), source, target,
            "immediate" if immediate else "end_of_period", stamp(ago), state, reason,
            "always_invoice" if immediate else "create_prorations", None, 1, None, applied,
            0.4 if applied else None, applied, None, stamp(ago + (0 if immediate else MONTH / 2)),
            stamp(ago - 1),
        )  # fmt: skip
