"""``billing-worker stripe webhooks …`` and ``stripe sync``: Stripe's truth flowing in."""

from __future__ import annotations

import json

import click

from worker.cli.base import DATABASE_ENV, STRIPE_ENV, BillingGroup, as_json_option, emit, services
from worker.cli.stripe_account import stripe
from worker.cli.tables import echo_list


@stripe.group("webhooks", cls=BillingGroup)
def stripe_webhooks() -> None:
    """Our webhook endpoint at Stripe (Stripe's events in, at POST /webhooks/stripe)."""


@stripe_webhooks.command("register", settings_env=(*DATABASE_ENV, *STRIPE_ENV))
@click.argument("url")
@as_json_option
def stripe_webhooks_register(url: str, as_json: bool) -> None:
    """Create (or update) our endpoint at Stripe for URL (this deployment's
    https://…/webhooks/stripe), for the event types we handle, at the pinned API version,
    and keep its signing secret for the API. Run it again at any time: an endpoint of URL
    whose secret we do not have is replaced."""
    from application.handlers.provider.stripe_endpoints import register_stripe_endpoint
    from application.requests.operator_requests import RegisterStripeEndpoint

    endpoint = register_stripe_endpoint(RegisterStripeEndpoint(url), services())
    emit(as_json, {"id": endpoint.id, "url": endpoint.url}, f"{endpoint.id}  {endpoint.url}")


@stripe_webhooks.command("list", settings_env=DATABASE_ENV)
@as_json_option
def stripe_webhooks_list(as_json: bool) -> None:
    """Our endpoints at Stripe whose secrets the API accepts (secrets not shown)."""
    svc = services()
    with svc.unit_of_work() as uow:
        endpoints = uow.stripe_endpoints.all()
    rows = [{"id": e.id, "url": e.url, "created_at": e.created_at.isoformat()} for e in endpoints]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    echo_list(
        ("ID", "CREATED", "URL"),
        [(row["id"], row["created_at"], row["url"]) for row in rows],
        empty="no endpoint registered (billing-worker stripe webhooks register URL)",
    )


@stripe.command("sync", settings_env=(*DATABASE_ENV, *STRIPE_ENV))
@click.argument("object_id")
@as_json_option
def stripe_sync(object_id: str, as_json: bool) -> None:
    """Re-read OBJECT_ID (a Stripe subscription sub_… or customer cus_…) from Stripe now and
    bring our rows in line, as a webhook would."""
    from application.handlers.provider.sync import resync_stripe_object
    from application.requests.operator_requests import ResyncStripeObject

    resync = ResyncStripeObject(
        "customer" if object_id.startswith("cus_") else "subscription",
        object_id,
        source="operator",
    )
    outcome = resync_stripe_object(resync, services())
    view = outcome.model_dump(mode="json")
    if as_json:
        click.echo(json.dumps(view, indent=2, sort_keys=True))
        return
    if not outcome.ours:
        click.echo(f"{object_id} is none of ours (see billing-worker stripe drift)")
        return
    changed = ", ".join(sorted(outcome.changes)) or "nothing: already in line"
    click.echo(f"{object_id}: {changed}")
