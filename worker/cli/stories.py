"""How ``accounts show`` and ``subscriptions show`` print a story: a summary, then one
timeline where commands, provider calls and events are merged by time."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from domain.billing.currencies import format_amount
from domain.operations.audit import AuditEntry
from domain.operations.console import (
    AccountStory,
    CommandView,
    EventView,
    ProviderCallView,
    SubscriptionStory,
    duration,
    merged,
)
from worker.cli.tables import COMMAND_HEADERS, command_row, table, when


def _short(iso: str | None) -> str:
    """An RFC 3339 time of a view, as the tables show times."""
    return "" if iso is None else when(datetime.fromisoformat(iso))


def _at(value: datetime) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S}.{value.microsecond // 1000:03d}"


def _command_lines(command: CommandView) -> list[tuple[datetime, str, str]]:
    lines = [(command.created_at, "command", f"{command.id} {command.type} ({command.source})")]
    outcome = f"{command.id} {command.status}, {command.attempts} attempt(s)"
    if command.last_error:
        outcome += f": {command.last_error}"
    if command.next_retry_at is not None:
        outcome += f"; next retry {when(command.next_retry_at)}"
    if command.status != "queued" or command.updated_at != command.created_at:
        lines.append((command.updated_at, "command", outcome))
    return lines


def _call_line(call: ProviderCallView) -> tuple[datetime, str, str]:
    text = f"{call.operation} attempt {call.attempt}: {call.outcome}"
    if call.error:
        text += f" ({call.error})"
    if call.idempotency_key:
        text += f"  key {call.idempotency_key}"
    if call.command_id:
        text += f"  by {call.command_id}"
    return call.at, "provider", f"{text}  {call.duration_ms}ms"


def _event_line(event: EventView) -> tuple[datetime, str, str]:
    published = "" if event.published_at is None else " (published)"
    by = f"  by {event.command_id}" if event.command_id else ""
    return event.occurred_at, "event", f"{event.type} {event.id}{published}{by}"


def _audit_line(entry: AuditEntry) -> tuple[datetime, str, str]:
    what = f"{entry.action} by {entry.operator} ({entry.surface}) on {' '.join(entry.targets)}"
    return entry.at, "operator", f"{what}: {entry.reason}  [{entry.id}]"


def timeline(
    commands: Sequence[CommandView],
    calls: Sequence[ProviderCallView],
    events: Sequence[EventView],
    audit: Sequence[AuditEntry] = (),
) -> list[str]:
    entries = [line for command in commands for line in _command_lines(command)]
    entries += [_call_line(call) for call in calls]
    entries += [_event_line(event) for event in events]
    entries += [_audit_line(entry) for entry in audit]
    if not entries:
        return ["  nothing happened to it yet"]
    return [f"  {_at(at)}  {kind:<8}  {text}" for at, kind, text in sorted(entries)]


def _commands_table(commands: Sequence[CommandView]) -> list[str]:
    if not commands:
        return ["  no commands"]
    rendered = table(COMMAND_HEADERS, [command_row(command) for command in commands])
    return ["  " + line for line in rendered.splitlines()]


def account_text(story: AccountStory) -> str:
    account: dict[str, Any] = story.billing_account
    organization = story.organization or {}
    stripe = story.provider_customer_id or "none (offline)"
    if account.get("customer_deleted_at"):
        stripe += f", deleted at {account['customer_deleted_at']}"
    lines = [
        f"billing account {account['id']}",
        f"  organization   {account['org_id']} {organization.get('name', '')}".rstrip(),
        f"  state          {account['state']}",
        f"  stripe         {stripe}",
        f"  currency       {account['currency']}",
        f"  created        {account['created_at']}",
    ]
    if story.registration_key:
        started = (
            "" if story.registration_started_at is None else when(story.registration_started_at)
        )
        lines.append(f"  registering    key {story.registration_key}, since {started}")
    for subscription in story.subscriptions:
        lines += ["", *_subscription_summary(subscription)]
    if not story.subscriptions:
        lines += ["", "no subscriptions"]
    commands, calls, events = merged(story)
    lines += ["", f"commands ({len(commands)})", *_commands_table(commands)]
    lines += ["", "timeline", *timeline(commands, calls, events, story.audit)]
    return "\n".join(lines)


def _subscription_summary(story: SubscriptionStory) -> list[str]:
    sub: dict[str, Any] = story.subscription
    lines = [
        f"subscription {sub['id']}",
        f"  account        {sub['billing_account_id']}",
        f"  plan           {sub['plan_id']} {(sub.get('plan') or {}).get('name', '')}".rstrip(),
        f"  state          {sub['state']}",
        f"  stripe         {sub['provider_id']}",
        f"  period         {_short(sub['current_period_start'])} → "
        f"{_short(sub['current_period_end'])}",
    ]
    if sub.get("billed_discount"):
        lines.append(f"  discount       {sub['billed_discount']} (at Stripe)")
    if sub.get("provider_schedule_id"):
        lines.append(
            f"  schedule       {sub['provider_schedule_id']} (at Stripe: plan changes refused)"
        )
    lines += [
        "",
        "phases",
    ]
    lines += [
        f"  {when(phase.effective_at)}  {phase.plan_id:<20} {phase.source}"
        for phase in story.phases
    ]
    lines += ["", "plan changes"]
    headers = ("ID", "KIND", "STATE", "FROM", "TO", "EFFECTIVE", "APPLIED", "LAG", "REASON")
    rows = [
        [
            change["id"],
            change["kind"],
            change["state"],
            change["from_plan_id"],
            change["plan_id"],
            _short(change["effective_at"]),
            _short(change["applied_at"]),
            duration(change["apply_lag_seconds"]),
            change["reason"] or "",
        ]
        for change in story.changes
    ]
    lines += ["  " + line for line in table(headers, rows).splitlines()]
    if not rows:
        lines.append("  no plan changes")
    lines += [
        f"  {change['id']} waits for the customer's payment until "
        f"{_short(change['payment_expires_at'])}: {change['payment_url'] or 'no page known'}"
        for change in story.changes
        if change["state"] == "awaiting_payment"
    ]
    lines += ["", "invoices"]
    if story.invoices is None:
        lines.append(f"  not read from the provider: {story.invoices_error or 'unknown'}")
    else:
        invoice_rows = [
            [
                invoice.id,
                invoice.number or "",
                invoice.status,
                format_amount(invoice.amount_due, invoice.currency),
                format_amount(invoice.amount_paid, invoice.currency),
                invoice.billing_reason or "",
                when(invoice.created),
            ]
            for invoice in story.invoices
        ]
        invoice_headers = ("ID", "NUMBER", "STATUS", "DUE", "PAID", "REASON", "CREATED")
        lines += ["  " + line for line in table(invoice_headers, invoice_rows).splitlines()]
        if not invoice_rows:
            lines.append("  no invoices")
        lines += _invoice_lines(story)
    lines += ["", "next invoice (the provider's preview)"]
    upcoming = story.next_invoice
    if upcoming is None:
        lines.append(f"  not read: {story.next_invoice_error or 'the subscription is over'}")
    else:
        lines.append(
            f"  {format_amount(upcoming.amount_due, upcoming.currency)} due, "
            f"{len(upcoming.lines)} line(s)"
        )
        lines += [
            f"  {format_amount(line.amount, upcoming.currency):>14}  {line.description}"
            for line in upcoming.lines
        ]
    return lines


def _invoice_lines(story: SubscriptionStory) -> list[str]:
    rows = [
        [
            invoice.id,
            line.description,
            format_amount(line.amount, invoice.currency),
            "yes" if line.proration else "",
            f"{when(line.period_start)} → {when(line.period_end)}",
            line.price_id or "",
        ]
        for invoice in story.invoices or []
        for line in invoice.lines
    ]
    if not rows:
        return []
    headers = ("INVOICE", "LINE", "AMOUNT", "PRORATION", "PERIOD", "PRICE")
    return ["", "invoice lines", *("  " + line for line in table(headers, rows).splitlines())]


def subscription_text(story: SubscriptionStory) -> str:
    lines = _subscription_summary(story)
    lines += ["", f"commands ({len(story.commands)})", *_commands_table(story.commands)]
    lines += ["", "timeline", *timeline(story.commands, story.provider_calls, story.events)]
    return "\n".join(lines)
