"""``billing-worker webhooks``: webhook endpoints, their secrets, and their deliveries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from domain.errors import CommandError
from worker.cli.audited import audited_options, command_help, take_action
from worker.cli.base import DATABASE_ENV, BillingGroup, as_json_option, emit, services, usage_error
from worker.cli.tables import echo_list, table

if TYPE_CHECKING:
    from domain.webhooks import WebhookDelivery, WebhookEndpoint

GRACE_ENV = (*DATABASE_ENV, "BILLING_WEBHOOK_SECRET_GRACE_SECONDS")
STATES = ("pending", "delivering", "succeeded", "failed")


@click.group(cls=BillingGroup)
def webhooks() -> None:
    """Webhook endpoints (URLs that receive the events, signed with their own secret) and
    their deliveries."""


def _event_types(values: Sequence[str]) -> list[str]:
    """`--events a --events b` and `--events a,b` alike; an unknown type is a wrong command
    line (exit status 2)."""
    from domain.webhooks import checked_event_types

    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    try:
        checked_event_types(names)
    except CommandError as error:
        usage_error(f"invalid --events: {error.message}")
    return names


def _endpoint_row(endpoint: WebhookEndpoint) -> list[str]:
    return [
        endpoint.id,
        endpoint.state.value,
        endpoint.url,
        ",".join(endpoint.event_types),
        endpoint.disabled_reason or "",
    ]


ENDPOINT_HEADERS = ("ID", "STATE", "URL", "EVENTS", "DISABLED BECAUSE")


def _delivery_row(delivery: WebhookDelivery) -> list[str]:
    status = "" if delivery.last_status is None else f"HTTP {delivery.last_status}"
    return [
        delivery.id,
        delivery.state.value,
        delivery.endpoint_id,
        delivery.event_id,
        delivery.event_type,
        str(delivery.attempts),
        f"{delivery.created_at:%Y-%m-%d %H:%M:%S}",
        delivery.last_error or status,
    ]


DELIVERY_HEADERS = (
    "ID",
    "STATE",
    "ENDPOINT",
    "EVENT",
    "TYPE",
    "ATTEMPTS",
    "CREATED",
    "LAST ANSWER",
)


def _duration(seconds: float) -> str:
    for unit, size in (("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = seconds / size
            return f"{count:g} {unit}" + ("" if count == 1 else "s")
    return f"{seconds:g} second" + ("" if seconds == 1 else "s")


@webhooks.command(
    "add",
    settings_env=DATABASE_ENV,
    help=command_help("add-webhook"),
    short_help="Add an endpoint; its signing secret is printed once and never again.",
)
@click.argument("url")
@click.option(
    "--events",
    "events",
    multiple=True,
    metavar="TYPE",
    help="An event type to send (repeat, or separate with commas); default: every event.",
)
@click.option("--description", default="", help="A note for operators (at most 255 characters).")
@audited_options("add-webhook")
@as_json_option
def webhooks_add(
    url: str, events: tuple[str, ...], description: str, reason: str, operator: str, as_json: bool
) -> None:
    svc = services()
    added = take_action(
        "add-webhook",
        svc,
        [url],
        reason,
        operator,
        {
            "events": _event_types(events),
            "description": description,
            "allow_private_networks": svc.settings.resolved_webhook_allow_private_networks(),
        },
    )
    view = added.endpoint.to_view()
    emit(
        as_json,
        {**view, "secret": added.secret},
        f"id:     {view['id']}\nsecret: {added.secret}\nevents: {','.join(view['events'])}\n"
        "(the secret is shown once; store it now)",
    )


@webhooks.command("list", settings_env=DATABASE_ENV)
@as_json_option
def webhooks_list(as_json: bool) -> None:
    """Every endpoint: id, state, URL, events and why it is disabled (never a secret)."""
    from application.handlers.events.webhook_endpoints import list_endpoints
    from application.requests.operator_requests import ListEndpoints

    found = list_endpoints(ListEndpoints(), services())
    if as_json:
        emit(True, [endpoint.to_view() for endpoint in found], "")
        return
    echo_list(
        ENDPOINT_HEADERS,
        [_endpoint_row(endpoint) for endpoint in found],
        empty="no webhook endpoints (billing-worker webhooks add URL)",
    )


@webhooks.command("show", settings_env=DATABASE_ENV)
@click.argument("endpoint_id")
@as_json_option
def webhooks_show(endpoint_id: str, as_json: bool) -> None:
    """One endpoint (never its secret)."""
    from application.handlers.events.webhook_endpoints import get_endpoint
    from application.requests.operator_requests import GetEndpoint

    endpoint = get_endpoint(GetEndpoint(endpoint_id), services())
    emit(as_json, endpoint.to_view(), table(ENDPOINT_HEADERS, [_endpoint_row(endpoint)]))


@webhooks.command(
    "disable",
    settings_env=DATABASE_ENV,
    help=command_help("disable-webhook", "`webhooks enable` undoes it."),
    short_help="Stop sending to an endpoint.",
)
@click.argument("endpoint_id")
@audited_options("disable-webhook")
@as_json_option
def webhooks_disable(endpoint_id: str, reason: str, operator: str, as_json: bool) -> None:
    disabled = take_action("disable-webhook", services(), [endpoint_id], reason, operator)
    emit(
        as_json,
        {**disabled.endpoint.to_view(), "abandoned_deliveries": disabled.abandoned},
        f"{endpoint_id} disabled: {disabled.endpoint.disabled_reason}; "
        f"{disabled.abandoned} unfinished deliveries marked failed",
    )


@webhooks.command(
    "enable",
    settings_env=DATABASE_ENV,
    help=command_help("enable-webhook"),
    short_help="Send to an endpoint again (its failed deliveries stay failed until replayed).",
)
@click.argument("endpoint_id")
@audited_options("enable-webhook")
@as_json_option
def webhooks_enable(endpoint_id: str, reason: str, operator: str, as_json: bool) -> None:
    endpoint = take_action("enable-webhook", services(), [endpoint_id], reason, operator)
    emit(as_json, endpoint.to_view(), f"{endpoint_id} enabled")


@webhooks.command(
    "rotate-secret",
    settings_env=GRACE_ENV,
    help=command_help("rotate-webhook-secret"),
    short_help="Give an endpoint a new secret, printed once.",
)
@click.argument("endpoint_id")
@audited_options("rotate-webhook-secret")
@as_json_option
def webhooks_rotate_secret(endpoint_id: str, reason: str, operator: str, as_json: bool) -> None:
    svc = services()
    grace = svc.settings.webhook_secret_grace_seconds
    rotated = take_action(
        "rotate-webhook-secret", svc, [endpoint_id], reason, operator, {"grace_seconds": grace}
    )
    until = f"{rotated.previous_valid_until:%Y-%m-%d %H:%M:%S} UTC"
    emit(
        as_json,
        {
            **rotated.endpoint.to_view(),
            "secret": rotated.secret,
            "previous_secret_expires_at": rotated.previous_valid_until.isoformat(),
        },
        f"secret: {rotated.secret}\n(the secret is shown once; store it now)\n"
        + (
            f"the old secret keeps signing for {_duration(grace)}, until {until}"
            if grace > 0
            else "the old secret no longer signs"
        ),
    )


@webhooks.command("deliveries", settings_env=DATABASE_ENV)
@click.option("--failed", "failed_only", is_flag=True, help="Only failed deliveries.")
@click.option("--state", type=click.Choice(STATES), default=None, help="Only in this state.")
@click.option("--endpoint", "endpoint_id", default=None, help="Only to this endpoint.")
@click.option("--event", "event_id", default=None, help="Only of this event (evt_…).")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@as_json_option
def webhooks_deliveries(
    failed_only: bool,
    state: str | None,
    endpoint_id: str | None,
    event_id: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Deliveries, newest first: state, endpoint, event, attempts and the last error."""
    from application.handlers.events.webhook_endpoints import list_deliveries
    from application.requests.operator_requests import ListDeliveries
    from domain.webhooks import DeliveryState

    if failed_only and state not in (None, DeliveryState.FAILED.value):
        usage_error(f"--failed and --state {state}: only failed deliveries, or those {state}")
    found = list_deliveries(
        ListDeliveries(
            failed_only=failed_only,
            state=None if state is None else DeliveryState(state),
            endpoint_id=endpoint_id,
            event_id=event_id,
            limit=limit,
        ),
        services(),
    )
    if as_json:
        emit(True, [delivery.to_view() for delivery in found], "")
        return
    filtered = failed_only or state or endpoint_id or event_id
    echo_list(
        DELIVERY_HEADERS,
        [_delivery_row(delivery) for delivery in found],
        empty="no webhook deliveries" + (" match" if filtered else ""),
    )


@webhooks.command("replay", settings_env=DATABASE_ENV)
@click.argument("delivery_ids", nargs=-1)
@click.option("--endpoint", "endpoint_id", default=None, help="With --failed: its deliveries.")
@click.option("--failed", "all_failed", is_flag=True, help="With --endpoint: every failed one.")
def webhooks_replay(
    delivery_ids: tuple[str, ...], endpoint_id: str | None, all_failed: bool
) -> None:
    """Send failed deliveries again, with a new retry budget: DELIVERY_ID…, or every failed
    delivery of an endpoint (--endpoint ID --failed). Its endpoint must be enabled. The
    sweep sends them within seconds."""
    from application.handlers.events.webhook_endpoints import replay_deliveries, replay_failed
    from application.requests.operator_requests import ReplayDeliveries, ReplayFailed

    if delivery_ids and (endpoint_id or all_failed):
        raise click.UsageError("give DELIVERY_IDs, or --endpoint ID --failed, not both")
    if not delivery_ids:
        if not (endpoint_id and all_failed):
            raise click.UsageError("give DELIVERY_IDs, or --endpoint ID --failed")
        count = replay_failed(ReplayFailed(endpoint_id), services())
        click.echo(f"replayed {count} failed deliveries of {endpoint_id}")
        return
    for delivery in replay_deliveries(ReplayDeliveries(delivery_ids), services()):
        click.echo(f"replayed {delivery.id}")
