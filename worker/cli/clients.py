"""``billing-worker clients``: API clients."""

from __future__ import annotations

import click

from worker.cli.base import DATABASE_ENV, BillingGroup, as_json_option, emit, services


@click.group(cls=BillingGroup)
def clients() -> None:
    """API clients (HTTP Basic credentials)."""


@clients.command("create", settings_env=DATABASE_ENV)
@click.option("--name", required=True)
@as_json_option
def clients_create(name: str, as_json: bool) -> None:
    """Create a client; its secret is printed once and never again."""
    from domain.rules import checked_name
    from worker.clients import create_client

    svc = services()
    client = create_client(svc.database(), svc.clock, checked_name(name, "name"))
    emit(
        as_json,
        {"client_id": client.client_id, "client_secret": client.secret, "name": client.name},
        f"client_id:     {client.client_id}\nclient_secret: {client.secret}\n"
        "(the secret is shown once; store it now)",
    )
