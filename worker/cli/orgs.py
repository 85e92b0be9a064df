"""``billing-worker orgs``: organizations."""

from __future__ import annotations

import base64
from pathlib import Path

import click

from worker.cli.base import DATABASE_ENV, BillingGroup, as_json_option, emit, services


@click.group(cls=BillingGroup)
def orgs() -> None:
    """Organizations."""


@orgs.command("create", settings_env=DATABASE_ENV)
@click.option("--name", required=True, help="Unique handle: letters, digits and _ . -")
@click.option("--title", default="", help="Shown to people; default: the name.")
@click.option("--id", "org_id", default=None, help="Default: a new org_… id.")
@click.option("--disabled", is_flag=True)
@click.option(
    "--avatar-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="An image (< 2 MB), stored base64-encoded.",
)
@as_json_option
def orgs_create(
    name: str,
    title: str,
    org_id: str | None,
    disabled: bool,
    avatar_file: Path | None,
    as_json: bool,
) -> None:
    """Create an organization."""
    from application.handlers.billing.organizations import create_organization
    from domain.billing.organizations import NewOrganization

    avatar = base64.b64encode(avatar_file.read_bytes()).decode() if avatar_file else None
    spec = NewOrganization(name=name, title=title, id=org_id, avatar=avatar, disabled=disabled)
    organization = create_organization(spec, services())
    emit(as_json, organization.to_view(), organization.id)
