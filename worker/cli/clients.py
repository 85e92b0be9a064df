"""``billing-worker clients``: API clients, their scopes and organizations, their secrets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from domain.permissions import Grant, Scope, parse_scopes
from worker.cli.audited import audited_options, command_help, take_action
from worker.cli.base import DATABASE_ENV, BillingGroup, as_json_option, emit, services, usage_error
from worker.cli.tables import echo_list

if TYPE_CHECKING:
    from adapters.db.api_clients import ClientView, NewClient

SCOPES_HELP = f"A scope the client holds (repeat for several): {', '.join(Scope)}, or * for all."
ORGS_HELP = "An organization the client may act in (repeat for several); default: every one."


@click.group(cls=BillingGroup)
def clients() -> None:
    """API clients (HTTP Basic credentials) and what each may do."""


def _grant(scopes: Sequence[str], org_ids: Sequence[str], default: Grant) -> Grant:
    from domain.rules import checked_id

    try:
        parsed = parse_scopes(scopes) if scopes else default.scopes
    except ValueError as error:
        usage_error(f"invalid --scope: {error}")
    orgs = frozenset(checked_id(org_id, "org") for org_id in org_ids) if org_ids else None
    return Grant(scopes=parsed, org_ids=orgs if org_ids else default.org_ids)


def _emit_secret(as_json: bool, client: NewClient) -> None:
    emit(
        as_json,
        {
            "client_id": client.client_id,
            "client_secret": client.secret,
            "name": client.name,
            "scopes": sorted(client.grant.scopes),
            "org_ids": None if client.grant.org_ids is None else sorted(client.grant.org_ids),
        },
        f"client_id:     {client.client_id}\nclient_secret: {client.secret}\n"
        f"scopes:        {' '.join(sorted(client.grant.scopes))}\n"
        "(the secret is shown once; store it now)",
    )


def _client_row(client: ClientView) -> list[str]:
    view = client.to_view()
    return [
        client.client_id,
        client.name,
        "enabled" if client.enabled else "disabled",
        " ".join(view["scopes"]),
        "(every organization)" if view["org_ids"] is None else " ".join(view["org_ids"]),
    ]


def _emit_client(as_json: bool, client: ClientView) -> None:
    view = client.to_view()
    orgs = "every organization" if view["org_ids"] is None else " ".join(view["org_ids"])
    state = "enabled" if client.enabled else "disabled"
    emit(
        as_json,
        view,
        f"{client.client_id}  {client.name}  {state}  {' '.join(view['scopes'])}  ({orgs})",
    )


@clients.command("create", settings_env=DATABASE_ENV)
@click.option("--name", required=True)
@click.option("--scope", "scopes", multiple=True, help=SCOPES_HELP)
@click.option("--org", "org_ids", multiple=True, help=ORGS_HELP)
@as_json_option
def clients_create(
    name: str, scopes: tuple[str, ...], org_ids: tuple[str, ...], as_json: bool
) -> None:
    """Create a client; its secret is printed once and never again. Without --scope it may
    only read back its own commands (commands:read): grant each operation it needs."""
    from adapters.db.api_clients import create_client
    from domain.rules import checked_name

    svc = services()
    grant = _grant(scopes, org_ids, Grant())
    client = create_client(svc.database(), svc.clock, checked_name(name, "name"), grant=grant)
    _emit_secret(as_json, client)


@clients.command("list", settings_env=DATABASE_ENV)
@as_json_option
def clients_list(as_json: bool) -> None:
    """Every client: id, name, state, scopes and organizations (never a secret)."""
    from adapters.db.api_clients import list_clients

    found = list_clients(services().database())
    if as_json:
        emit(True, [client.to_view() for client in found], "")
        return
    echo_list(
        ("CLIENT ID", "NAME", "STATE", "SCOPES", "ORGANIZATIONS"),
        [_client_row(client) for client in found],
        empty="no API clients (billing-worker clients create --name NAME)",
    )


@clients.command("update", settings_env=DATABASE_ENV)
@click.argument("client_id")
@click.option("--name")
@click.option("--scope", "scopes", multiple=True, help=f"{SCOPES_HELP} Replaces its scopes.")
@click.option("--org", "org_ids", multiple=True, help=f"{ORGS_HELP} Replaces its list.")
@click.option("--all-orgs", is_flag=True, help="Let the client act in every organization.")
@click.option("--enable", "enabled", flag_value=True, default=None, help="Enable the client.")
@as_json_option
def clients_update(
    client_id: str,
    name: str | None,
    scopes: tuple[str, ...],
    org_ids: tuple[str, ...],
    all_orgs: bool,
    enabled: bool | None,
    as_json: bool,
) -> None:
    """Rename a client, replace its scopes or organizations, or enable it again. API
    processes apply it once their cached verification ends (BILLING_AUTH_CACHE_SECONDS)."""
    from adapters.db.api_clients import get_client, update_client
    from domain.rules import checked_name

    if org_ids and all_orgs:
        usage_error("give --org or --all-orgs, not both")
    svc = services()
    grant = None
    if scopes or org_ids or all_orgs:
        grant = _grant(scopes, org_ids, get_client(svc.database(), client_id).grant)
        if all_orgs:
            grant = Grant(scopes=grant.scopes, org_ids=None)
    client = update_client(
        svc.database(),
        svc.clock,
        client_id,
        name=checked_name(name, "name") if name is not None else None,
        grant=grant,
        enabled=enabled,
    )
    _emit_client(as_json, client)


@clients.command("disable", settings_env=DATABASE_ENV)
@click.argument("client_id")
@as_json_option
def clients_disable(client_id: str, as_json: bool) -> None:
    """Disable a client: its requests get 401 (within BILLING_AUTH_CACHE_SECONDS in API
    processes that verified it recently). `clients update ID --enable` undoes it."""
    from adapters.db.api_clients import update_client

    svc = services()
    _emit_client(as_json, update_client(svc.database(), svc.clock, client_id, enabled=False))


ROTATE_CLIENT_SECRET_KIND = "rotate-client-secret"  # noqa: S105 - an action kind, not a secret


@clients.command(
    "rotate-secret",
    settings_env=DATABASE_ENV,
    help=command_help(ROTATE_CLIENT_SECRET_KIND),
    short_help="Give a client a new secret, printed once.",
)
@click.argument("client_id")
@audited_options(ROTATE_CLIENT_SECRET_KIND)
@as_json_option
def clients_rotate_secret(client_id: str, reason: str, operator: str, as_json: bool) -> None:
    from adapters.db.api_clients import NewClient, get_client
    from worker.local.seed import remember_rotated_demo_secret
    from worker.settings import get_settings

    svc = services()
    rotated = take_action(ROTATE_CLIENT_SECRET_KIND, svc, [client_id], reason, operator)
    client = get_client(svc.database(), client_id)
    # The demo client's secret kept in the data directory stays the live one (`demo`, `up`).
    remember_rotated_demo_secret(get_settings(), client_id, rotated.secret)
    _emit_secret(as_json, NewClient(client_id, rotated.secret, client.name, client.grant))
