"""``billing-worker users``: users."""

from __future__ import annotations

import click

from worker.cli.base import DATABASE_ENV, BillingGroup, as_json_option, emit, services


@click.group(cls=BillingGroup)
def users() -> None:
    """Users."""


@users.command("create", settings_env=DATABASE_ENV)
@click.option("--email", required=True, help="Unique; stored normalized.")
@click.option("--name", default="")
@click.option("--id", "user_id", default=None, help="Default: a new usr_… id.")
@click.option("--disabled", is_flag=True, help="Create the user disabled.")
@as_json_option
def users_create(email: str, name: str, user_id: str | None, disabled: bool, as_json: bool) -> None:
    """Create a user."""
    from application.handlers.users import create_user
    from domain.users import NewUser

    user = create_user(NewUser(email=email, name=name, id=user_id, disabled=disabled), services())
    emit(as_json, user.to_view(), user.id)
