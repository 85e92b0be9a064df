"""A subscription's page: its phases, its plan changes (scheduled, staged, applied) with their
lag as a duration, its next invoice as Stripe previews it, its invoices with their lines, and
its timeline: the story ``billing-worker subscriptions show`` tells
(``application/handlers/operations/actions.py``)."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from application.handlers.operations.actions import subscription_story
from application.requests.operator_actions import ShowSubscription
from domain.billing.currencies import format_amount
from domain.messages import ID_PATTERN
from domain.operations.console import InvoiceView, SubscriptionStory, duration
from worker.api.console.access import Viewer, may_see
from worker.api.console.actions import subscription_actions
from worker.api.console.layout import (
    PREFIX,
    badge,
    facts,
    link,
    message_page,
    page,
    section,
    table,
    text,
    url,
    when,
)
from worker.api.console.timeline import timeline_rows
from worker.api.state import State

router = APIRouter()


def money(amount: int, currency: str) -> str:
    """Minor units as a reader reads them (:func:`domain.billing.currencies.format_amount`,
    as the CLI shows them), escaped for the page."""
    return text(format_amount(amount, currency))


def _summary(story: SubscriptionStory) -> str:
    sub: dict[str, Any] = story.subscription
    plan = sub.get("plan") or {}
    figures = [
        (
            "Account",
            link(url("accounts", str(sub["billing_account_id"])), sub["billing_account_id"]),
        ),
        ("Plan", f"{text(sub['plan_id'])} {text(plan.get('name', ''))}"),
        ("State", badge(sub["state"])),
        ("Stripe subscription", f"<code>{text(sub['provider_id'])}</code>"),
        ("Period", f"{when(sub['current_period_start'])} → {when(sub['current_period_end'])}"),
    ]
    # Made at Stripe, never by us: what the customer pays, and what refuses plan changes.
    if sub.get("billed_discount"):
        figures.append(("Discount at Stripe", text(sub["billed_discount"])))
    if sub.get("provider_schedule_id"):
        figures.append(
            (
                "Schedule at Stripe",
                f"<code>{text(sub['provider_schedule_id'])}</code> (plan changes refused "
                "until it is released)",
            )
        )
    return facts(figures)


def _phases(story: SubscriptionStory) -> str:
    rows = [[when(p.effective_at), text(p.plan_id), text(p.source)] for p in story.phases]
    return section("Phases", table(("From", "Plan", "Source"), rows, "no phases"), id="phases")


def _changes(story: SubscriptionStory) -> str:
    rows = [
        [
            f"<code>{text(change['id'])}</code>",
            text(change["kind"]),
            badge(change["state"]),
            text(change["from_plan_id"]),
            text(change["plan_id"]),
            when(change["effective_at"]),
            when(change["applied_at"]),
            text(duration(change["apply_lag_seconds"])),
            text(change["reason"]),
        ]
        for change in story.changes
    ]
    headers = ("Change", "Kind", "State", "From", "To", "Effective", "Applied", "Lag", "Reason")
    waiting = "".join(
        f"<p><code>{text(change['id'])}</code> waits for the customer's payment until "
        f"{when(change['payment_expires_at'])}: "
        + (
            link(str(change["payment_url"]), "the invoice's payment page")
            if change["payment_url"]
            else "no page known"
        )
        + "</p>"
        for change in story.changes
        if change["state"] == "awaiting_payment"
    )
    body = table(headers, rows, "no plan changes") + waiting
    return section("Plan changes", body, id="changes")


def _invoice(invoice: InvoiceView) -> str:
    """An invoice's figures, then its lines."""
    figures = [
        ("Invoice", f"<code>{text(invoice.id)}</code> {text(invoice.number or '')}"),
        ("Status", badge(invoice.status)),
        ("Total", money(invoice.total, invoice.currency)),
        ("Due", money(invoice.amount_due, invoice.currency)),
        ("Paid", money(invoice.amount_paid, invoice.currency)),
    ]
    if invoice.total_discount:
        figures.append(("Discounts", money(invoice.total_discount, invoice.currency)))
    if invoice.credited:
        figures.append(("Credit notes", money(invoice.credited, invoice.currency)))
    if invoice.starting_balance or invoice.ending_balance:
        # What the customer's balance took or carried: why "Due" differs from "Total".
        figures.append(
            (
                "Customer balance",
                f"{money(invoice.starting_balance, invoice.currency)} → "
                f"{money(invoice.ending_balance, invoice.currency)}"
                " (positive: owed, carried to the next invoice; negative: credit)",
            )
        )
    figures += [
        ("Reason", text(invoice.billing_reason)),
        ("Created", when(invoice.created)),
        ("Period", f"{when(invoice.period_start)} → {when(invoice.period_end)}"),
    ]
    head = facts(figures)
    lines = [
        [
            text(line.description),
            money(line.amount, invoice.currency),
            money(line.discount, invoice.currency) if line.discount else "",
            "proration" if line.proration else "",
            f"{when(line.period_start)} → {when(line.period_end)}",
            text(line.price_id),
        ]
        for line in invoice.lines
    ]
    line_table = table(("Line", "Amount", "Discount", "", "Period", "Price"), lines, "no lines")
    return f'<article class="invoice">{head}{line_table}</article>'


def _next_invoice(story: SubscriptionStory) -> str:
    if story.next_invoice is None:
        why = text(story.next_invoice_error or "the subscription is over")
        body = f'<p class="message">Not read from Stripe: {why}</p>'
    else:
        body = _invoice(story.next_invoice)
    for change in story.changes:
        if change["state"] == "scheduled":  # not at Stripe yet: the preview cannot know it
            body = (
                f'<p class="message">The change to {text(change["plan_id"])} at '
                f"{when(change['effective_at'])} is made at Stripe shortly before then: "
                "until it is, this preview is at the current plan.</p>"
            ) + body
    return section("Next invoice (Stripe's preview)", body, id="next-invoice")


def _invoices(story: SubscriptionStory) -> str:
    if story.invoices is None:
        why = text(story.invoices_error or "unknown")
        return section(
            "Invoices", f'<p class="message">Not read from Stripe: {why}</p>', id="invoices"
        )
    parts = [_invoice(invoice) for invoice in story.invoices]
    body = "".join(parts) if parts else '<p class="empty">no invoices yet</p>'
    return section("Invoices (read from Stripe)", body, id="invoices")


def subscription_body(story: SubscriptionStory) -> str:
    rows = timeline_rows(story.commands, story.provider_calls, story.events)
    timeline = table(("When", "What", "", "Detail"), rows, "nothing happened to it yet")
    return (
        _summary(story)
        + _phases(story)
        + _changes(story)
        + _next_invoice(story)
        + _invoices(story)
        + section("Timeline", timeline, id="timeline")
    )


@router.get(PREFIX + "/subscriptions/{subscription_id}")
def subscription_page(subscription_id: str, caller: Viewer, state: State) -> HTMLResponse:
    svc = state.svc
    valid = len(subscription_id) <= 128 and re.fullmatch(ID_PATTERN, subscription_id)
    read = svc.console().subscription_story(subscription_id) if valid else None
    org_id = None
    if read is not None:
        account = svc.console().account_story(str(read.subscription["billing_account_id"]))
        org_id = None if account is None else str(account.billing_account["org_id"])
    if read is None or org_id is None or not may_see(caller, org_id):
        return message_page("Not found", f"No subscription {subscription_id}.", status=404)
    story = subscription_story(ShowSubscription(read), svc)
    body = subscription_body(story) + subscription_actions(caller, story)
    return page(f"Subscription {subscription_id}", body, nav="accounts")
