"""``billing-worker demo``: the demo data ``up`` seeds, with its ids and the demo client."""

from __future__ import annotations

import click

from worker.cli.base import DATA_DIR, BillingCommand, as_json_option, emit
from worker.local.stack_state import read_stack
from worker.settings import get_settings


@click.command("demo", cls=BillingCommand, settings_env=(DATA_DIR,))
@as_json_option
def demo(as_json: bool) -> None:
    """The demo data `up` seeds (organizations, user, plans, billing account, subscription,
    API client) with their ids, and the demo client's credentials kept in the data
    directory."""
    from worker.local.banner import demo_records, demo_table
    from worker.local.seed import saved_demo_credentials

    settings = get_settings()
    stack = read_stack(settings.data_dir)
    with_billing = not stack or bool(stack.get("stripe_emulator_url"))
    records = demo_records(with_billing)
    credentials = saved_demo_credentials(settings)
    lines = demo_table(records, indent="")
    if credentials is None:
        lines.append(
            f"\nno `up` has seeded {settings.data_dir.resolve()} yet: `billing-worker up` does"
        )
    else:
        lines.append(
            f"\nclient id {credentials.client_id}   secret {credentials.client_secret}"
            "   (HTTP Basic)"
        )
    emit(
        as_json,
        {
            "data": [record.to_view() for record in records],
            "client_id": credentials.client_id if credentials else None,
            "client_secret": credentials.client_secret if credentials else None,
        },
        "\n".join(lines),
    )
