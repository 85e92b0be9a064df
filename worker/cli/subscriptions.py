"""``billing-worker subscriptions``: subscriptions of billing accounts to plans."""

from __future__ import annotations

import json
import time
import uuid
from typing import Literal, cast

import click

from application.requests.operator_actions import ShowSubscription
from domain.billing.currencies import format_amount
from domain.errors import found
from domain.subscriptions.change_previews import PreviewPlanChange
from domain.subscriptions.subscription import SubscriptionTerms
from worker.cli.base import (
    DATABASE_ENV,
    STRIPE_ENV,
    BillingGroup,
    as_json_option,
    emit,
    services,
)
from worker.cli.stories import subscription_text


@click.group(cls=BillingGroup)
def subscriptions() -> None:
    """Subscriptions of billing accounts to plans."""


@subscriptions.command("create", settings_env=(*DATABASE_ENV, *STRIPE_ENV))
@click.option("--org", "org_id", required=True, help="The organization's id.")
@click.option("--billing-account", "billing_account_id", required=True)
@click.option("--plan", "plan_ref", required=True, help="The plan's name or id.")
@click.option("--id", "subscription_id", default=None, help="Default: a new sub_… id.")
@click.option(
    "--collection",
    type=click.Choice(["send_invoice", "charge_automatically"]),
    default="send_invoice",
    show_default=True,
    help="send_invoice: active at once, no payment method needed (Stripe emails an invoice); "
    "charge_automatically: needs the customer's default payment method.",
)
@click.option("--days-until-due", type=click.IntRange(0, 730), default=30, show_default=True)
@click.option("--trial-days", type=click.IntRange(0, 730), default=0, show_default=True)
@as_json_option
def subscriptions_create(
    org_id: str,
    billing_account_id: str,
    plan_ref: str,
    subscription_id: str | None,
    collection: str,
    days_until_due: int,
    trial_days: int,
    as_json: bool,
) -> None:
    """Subscribe a registered billing account to a plan at the provider. To retry a creation
    that failed midway, run it again with the same --id."""
    from application.handlers.subscriptions.subscribe import create_subscription
    from application.requests.operator_requests import CreateSubscription

    terms = SubscriptionTerms(
        collection_method=cast(Literal["send_invoice", "charge_automatically"], collection),
        days_until_due=days_until_due,
        trial_days=trial_days,
    )
    subscription = create_subscription(
        CreateSubscription(
            org_id=org_id,
            billing_account_id=billing_account_id,
            plan_ref=plan_ref,
            terms=terms,
            subscription_id=subscription_id,
        ),
        services(),
    )
    emit(as_json, subscription.to_view(), subscription.id)


@subscriptions.command("show", settings_env=(*DATABASE_ENV, *STRIPE_ENV))
@click.argument("subscription_id")
@as_json_option
def subscriptions_show(subscription_id: str, as_json: bool) -> None:
    """A subscription: its phases (past, current, to come), its plan changes (scheduled,
    staged, applied with their lag, skipped…), its newest invoices at Stripe, and a timeline
    of the commands, Stripe calls and events that concern it."""
    from application.handlers.operations.actions import subscription_story
    from domain.rules import checked_id

    svc = services()
    subscription_id = checked_id(subscription_id, "subscription")
    read = found(svc.console().subscription_story(subscription_id), "subscription", subscription_id)
    story = subscription_story(ShowSubscription(read), svc)
    shown = story.model_dump(mode="json")
    # The subscription's own fields stay at the top, as `show --json` always printed them.
    emit(as_json, {**shown.pop("subscription"), **shown}, subscription_text(story))


@subscriptions.command("preview-change", settings_env=(*DATABASE_ENV, *STRIPE_ENV))
@click.argument("subscription_id")
@click.option("--org", "org_id", required=True, help="The organization's id.")
@click.option("--billing-account", "billing_account_id", required=True)
@click.option("--plan", "plan_ref", required=True, help="The plan's name or id.")
@as_json_option
def subscriptions_preview_change(
    subscription_id: str, org_id: str, billing_account_id: str, plan_ref: str, as_json: bool
) -> None:
    """What changing SUBSCRIPTION_ID to --plan now would invoice, from Stripe's preview
    (amounts in the currency's units; with --json, in minor units); changes nothing. Send
    the printed proration date with the change (`plan_change.proration_date`) within 5
    minutes to be invoiced exactly this."""
    from application.handlers.subscriptions.previews import preview_plan_change

    preview = preview_plan_change(
        PreviewPlanChange(
            command_id=f"cli-preview-{uuid.uuid4().hex}",
            org_id=org_id,
            billing_account_id=billing_account_id,
            subscription_id=subscription_id,
            plan=plan_ref,
        ),
        services(),
    ).model_dump(mode="json")
    if as_json:
        click.echo(json.dumps(preview, indent=2, sort_keys=True))
        return
    currency = preview["currency"]
    click.echo(
        f"{preview['subscription_id']} → {preview['plan_id']}: "
        f"{format_amount(preview['amount_due'], currency)} due ({preview['billed']}, "
        f"{preview['proration_behavior']}), prorated at {preview['proration_date']}"
    )
    for line in preview["lines"]:
        click.echo(f"  {format_amount(line['amount'], currency):>14}  {line['description']}")
    if preview["carried_to_balance"]:
        click.echo(
            f"  below Stripe's minimum charge: not charged now; "
            f"{format_amount(preview['carried_to_balance'], currency)} is added to the "
            "customer's balance and paid with the next invoice"
        )


@subscriptions.command("seed-period-end", settings_env=(*DATABASE_ENV, *STRIPE_ENV))
@click.argument("count", type=click.IntRange(1, 100_000))
@click.option("--org", "org_id", default="org_demo", show_default=True)
@click.option("--billing-account", "billing_account_id", default="ba_demo", show_default=True)
@click.option("--plan", "plan_ref", default="starter", show_default=True)
@click.option("--to", "target_plan_ref", default="team", show_default=True)
def subscriptions_seed_period_end(
    count: int, org_id: str, billing_account_id: str, plan_ref: str, target_plan_ref: str
) -> None:
    """Make COUNT subscriptions, each with a plan change at its period's end: the period-end
    burst (then `billing-worker clock advance 31d --reason WHY` on a local stack makes them
    all due)."""
    from application.handlers.subscriptions.subscribe import seed_period_end_changes
    from application.requests.operator_requests import SeedPeriodEndChanges

    began = time.monotonic()
    seeding = SeedPeriodEndChanges(
        org_id=org_id,
        billing_account_id=billing_account_id,
        plan_ref=plan_ref,
        target_plan_ref=target_plan_ref,
        count=count,
    )
    change_ids: list[str] = []
    for change_id in seed_period_end_changes(seeding, services()):
        change_ids.append(change_id)
        done = len(change_ids)
        if done % 100 == 0 or done == count:
            click.echo(f"  {done}/{count} subscriptions ({time.monotonic() - began:.0f}s)")
    click.echo(
        f"{len(change_ids)} changes from {plan_ref} to {target_plan_ref} scheduled at the end "
        f"of the period; `billing-worker clock advance 31d --reason WHY` makes them due"
    )
