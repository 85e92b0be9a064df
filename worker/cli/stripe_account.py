"""``billing-worker stripe``: the Stripe account as this system uses it."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import click

from worker.cli.base import (
    DATABASE_ENV,
    STRIPE_ENV,
    BillingGroup,
    as_json_option,
    fail,
    services,
)
from worker.local.stack_state import stack_settings

if TYPE_CHECKING:
    from application.handlers.drift.report import Adoption
    from domain.drift.report import Finding

DRIFT_FOUND = 1
"""``stripe drift``'s exit status when drift is found (left, with ``--adopt``)."""


@click.group("stripe", cls=BillingGroup)
def stripe() -> None:
    """The Stripe account as this system uses it."""


@stripe.command("budget", settings_env=STRIPE_ENV)
@as_json_option
def stripe_budget(as_json: bool) -> None:
    """The shared rate budget: configured and current rate, calls in the last minute, calls
    waiting for a token, and 429s."""
    from worker.bootstrap import budget_for

    budget = budget_for(stack_settings())
    if not budget.enabled:
        fail("no rate budget: BILLING_STRIPE_BUDGET_ENABLED is off, or no Stripe key is set")
    usage = budget.usage()
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(usage), indent=2, sort_keys=True))
        return
    click.echo(
        f"stripe account {usage.account} ({usage.mode} mode)  burst {usage.burst}  "
        f"longest wait in a task {usage.max_wait_seconds:g}s"
    )
    click.echo(
        f"  {'':<6} {'rate/s':>7} {'now/s':>7} {'calls/min':>10} {'waiting':>8} "
        f"{'deferred/min':>13} {'429/min':>8} {'429 total':>10} {'waited s':>9} {'ahead s':>8}"
    )
    for kind, figures in usage.kinds.items():
        click.echo(
            f"  {kind.value:<6} {figures.configured_rate:>7g} {figures.effective_rate:>7.1f} "
            f"{figures.calls_last_minute:>10} {figures.waiting:>8} "
            f"{figures.deferred_last_minute:>13} {figures.rate_limited_last_minute:>8} "
            f"{figures.rate_limited_total:>10} {figures.wait_seconds_total:>9.1f} "
            f"{figures.backlog_seconds:>8.2f}"
        )


@stripe.command("drift", settings_env=(*DATABASE_ENV, *STRIPE_ENV))
@click.option(
    "--adopt",
    is_flag=True,
    help="Link what can be linked safely (an account pending without a customer to the one "
    "customer naming it; an orphan subscription naming an id of ours, of a linked customer, "
    "on one of our plans' prices); say what the rest needs from a person.",
)
@click.option(
    "--skip-invoices",
    is_flag=True,
    help="Leave out the money check (it reads each subscription's latest invoices: one Stripe "
    "read per subscription).",
)
@as_json_option
def stripe_drift(adopt: bool, skip_invoices: bool, as_json: bool) -> None:
    """Compare every customer and subscription at Stripe (listed, status all) with the
    database, and print each difference: its kind, the ids involved, what differs, and
    whether it can be adopted (or what a person should do).

    \b
    Kinds:
      orphan_customer       a customer naming an account we do not have, or one that has
                            no customer yet (adoptable when pending or offline)
      customer_mismatch     a customer naming an account linked to another customer
      duplicate_customers   several customers naming one account
      missing_customer      an account's customer is not at Stripe
      orphan_subscription   a Stripe subscription without a row here
      missing_subscription  a row whose Stripe subscription is gone
      plan_mismatch         Stripe bills another price than the row's plan's (what
                            Stripe bills against what we think: amount, currency,
                            interval)
      period_mismatch       Stripe's period is on another billing cycle than the row's
      state_mismatch        Stripe's state is not the row's
      renewal_mismatch      the latest renewal invoice billed other money than the plan
                            our rows had in force at that period's start (corrections
                            as of the period's start included)
      schedule_at_stripe    a subscription schedule at Stripe manages the subscription
                            (plan changes are refused here meanwhile)
      discount_at_stripe    Stripe takes a discount (a coupon) off the subscription's
                            price, now or on its latest renewal: what the plan is
                            billed, and what the renewal billed after discounts
      credited_at_stripe    credit notes gave part of the latest renewal back: what
                            the period cost

    \b
    Exit status: 0 no drift (with --adopt: none left, everything found was adopted);
    1 drift found (with --adopt: some still needs a person), printed on stdout, or the
    request refused (one line on stderr: no Stripe key); 3 the database or Stripe is
    unreachable.
    """
    from application.handlers.drift.report import adopt_findings, drift_report
    from application.requests.operator_requests import AdoptFindings, ReportDrift

    svc = services()
    findings = drift_report(ReportDrift(read_invoices=not skip_invoices), svc)
    adoptions = adopt_findings(AdoptFindings(findings), svc) if adopt else None
    if as_json:
        click.echo(json.dumps(_drift_views(findings, adoptions), indent=2, sort_keys=True))
    else:
        _print_drift(findings, adoptions)
    left = (
        len(findings)
        if adoptions is None
        else sum(1 for adoption in adoptions if not adoption.adopted)
    )
    if left:
        raise click.exceptions.Exit(DRIFT_FOUND)


def _drift_views(findings: list[Finding], adoptions: list[Adoption] | None) -> list[dict[str, Any]]:
    if adoptions is None:
        return [finding.to_view() for finding in findings]
    return [{**adoption.finding.to_view(), "outcome": adoption.outcome} for adoption in adoptions]


def _print_drift(findings: list[Finding], adoptions: list[Adoption] | None) -> None:
    """A header row, then two lines per finding: its kind, whether it is adoptable (with
    --adopt: what became of it), its ids and what differs; then what adopting does or what
    a person should do."""
    if not findings:
        click.echo("no drift found")
        return
    if adoptions is None:
        header = "ADOPTABLE"
        rows = [
            (finding, "yes" if finding.adoptable else "no", finding.action) for finding in findings
        ]
    else:
        header = "OUTCOME"
        rows = []
        for adoption in adoptions:
            status, _, why = adoption.outcome.partition(": ")
            rows.append((adoption.finding, status, why or adoption.finding.action))
    kinds = max(len("KIND"), *(len(finding.kind.value) for finding, _, _ in rows))
    statuses = max(len(header), *(len(status) for _, status, _ in rows))
    ids = max(len("IDS"), *(len(" ".join(finding.ids)) for finding, _, _ in rows))
    indent = " " * (kinds + statuses + ids + 6)
    click.echo(f"{'KIND':<{kinds}}  {header:<{statuses}}  {'IDS':<{ids}}  DESCRIPTION")
    for finding, status, note in rows:
        named = " ".join(finding.ids)
        click.echo(
            f"{finding.kind.value:<{kinds}}  {status:<{statuses}}  {named:<{ids}}  "
            f"{finding.description}"
        )
        click.echo(f"{indent}→ {note}")
    if adoptions is None:
        adoptable = sum(1 for finding in findings if finding.adoptable)
        click.echo(
            f"{len(findings)} found: {adoptable} adoptable (run with --adopt), "
            f"{len(findings) - adoptable} need a person"
        )
    else:
        adopted = sum(1 for adoption in adoptions if adoption.adopted)
        click.echo(f"{len(findings)} found: {adopted} adopted, {len(findings) - adopted} left")
