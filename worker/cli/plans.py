"""``billing-worker plans``: plans, each a product with one recurring price at the provider."""

from __future__ import annotations

import json

import click

from domain.billing.currencies import format_amount
from domain.subscriptions.plans import PlanSpec
from worker.cli.base import DATABASE_ENV, STRIPE_ENV, BillingGroup, as_json_option, emit, services
from worker.cli.tables import echo_list


@click.group(cls=BillingGroup)
def plans() -> None:
    """Plans: a product with one recurring price at the provider."""


@plans.command("create", settings_env=(*DATABASE_ENV, *STRIPE_ENV))
@click.option("--name", required=True, help="Unique name, e.g. starter (a-z, 0-9, - and _).")
@click.option("--title", default="", help="Shown on invoices; default: from the name.")
@click.option(
    "--amount",
    type=int,
    required=True,
    help="Price per interval, in minor units of the currency (cents; whole yen for "
    "zero-decimal currencies): 4900 is 49.00 USD, 500 is 500 JPY.",
)
@click.option("--currency", required=True, help="ISO 4217, one Stripe accepts, e.g. usd.")
@click.option(
    "--interval", type=click.Choice(["month", "year"]), default="month", show_default=True
)
@click.option("--id", "plan_id", default=None, help="Default: a new plan_… id.")
@as_json_option
def plans_create(
    name: str,
    title: str,
    amount: int,
    currency: str,
    interval: str,
    plan_id: str | None,
    as_json: bool,
) -> None:
    """Create a plan, with its product and price at the provider. Running it again after a
    failure resumes the same plan."""
    from application.handlers.subscriptions.plans import create_plan
    from application.requests.operator_requests import CreatePlan

    spec = PlanSpec(name=name, title=title, amount=amount, currency=currency, interval=interval)
    plan = create_plan(CreatePlan(spec, plan_id=plan_id), services())
    emit(as_json, plan.to_view(), plan.id)


@plans.command("list", settings_env=DATABASE_ENV)
@as_json_option
def plans_list(as_json: bool) -> None:
    """List the plans, each with its price in the currency's units (49.00 USD, 500 JPY)."""
    from application.handlers.subscriptions.plans import list_plans
    from application.requests.operator_requests import ListPlans

    found = list_plans(ListPlans(), services())
    if as_json:
        click.echo(json.dumps([plan.to_view() for plan in found], indent=2, sort_keys=True))
        return
    echo_list(
        ("ID", "NAME", "PRICE", "PROVIDER PRICE"),
        [
            (
                plan.id,
                plan.name,
                f"{format_amount(plan.amount, plan.currency)} / {plan.interval.value}",
                plan.provider_price_id or "(not at the provider)",
            )
            for plan in found
        ],
        empty="no plans (billing-worker plans create)",
    )
