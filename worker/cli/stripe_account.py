"""``billing-worker stripe``: the Stripe account as this system uses it."""

from __future__ import annotations

import dataclasses
import json

import click

from worker.cli.base import STRIPE_ENV, BillingGroup, as_json_option, fail
from worker.settings import get_settings


@click.group("stripe", cls=BillingGroup)
def stripe() -> None:
    """The Stripe account as this system uses it."""


@stripe.command("budget", settings_env=STRIPE_ENV)
@as_json_option
def stripe_budget(as_json: bool) -> None:
    """The shared rate budget: configured and current rate, calls in the last minute, calls
    waiting for a token, and 429s."""
    from worker.bootstrap import budget_for

    budget = budget_for(get_settings())
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
