"""The settings and command-line pages of the documentation are generated from the source
(``worker.cli.reference_docs``): up to date, and stale as soon as a setting or a command is
added without regenerating them."""

from __future__ import annotations

import subprocess
import sys

import click
from pydantic import Field

from tests.support.environment import settings_environment
from worker.cli import main
from worker.cli.reference_docs import (
    CLI_PAGE,
    REFRESH,
    SETTINGS_PAGE,
    cli_page,
    settings_page,
)
from worker.settings import SECTIONS, Section, Settings


def test_the_settings_and_cli_pages_are_what_the_source_makes() -> None:
    # In a process of its own, with no setting in its environment: help text shows defaults,
    # which another test of this process may have changed.
    checked = subprocess.run(
        [sys.executable, "-m", "worker.cli.reference_docs", "--check"],
        env=settings_environment(),
        capture_output=True,
        text=True,
        check=False,
    )

    assert checked.returncode == 0, f"{checked.stdout}{checked.stderr}: run {REFRESH}"


def test_every_setting_has_a_description_and_a_row_on_the_settings_page() -> None:
    page = SETTINGS_PAGE.read_text()
    undescribed = [name for name, field in Settings.model_fields.items() if not field.description]

    assert undescribed == [], "describe each setting in its Field(description=...)"
    for name in Settings.model_fields:
        assert f"| `BILLING_{name.upper()}` |" in page


def test_a_setting_added_without_regenerating_makes_the_settings_page_stale() -> None:
    class BrandNewSettings(Section):
        """A new section."""

        title = "Brand new"
        brand_new_seconds: float = Field(default=2.5, gt=0, description="A new knob.")

    page = settings_page((*SECTIONS, BrandNewSettings))

    assert page != SETTINGS_PAGE.read_text()
    assert "## Brand new\n\nA new section." in page
    assert "| `BILLING_BRAND_NEW_SECONDS` | number, > 0 | `2.5` | A new knob. |" in page


def test_a_command_added_without_regenerating_makes_the_cli_page_stale() -> None:
    @click.group()
    def copy() -> None:
        """billing-worker, with one command more."""

    for name, command in main.commands.items():
        copy.add_command(command, name)

    @copy.command("brand-new")
    def brand_new() -> None:
        """A new command."""

    page = cli_page(copy)

    assert page != CLI_PAGE.read_text()
    assert "## `billing-worker brand-new`" in page
    assert "A new command." in page


def test_the_cli_page_shows_every_command_s_help() -> None:
    page = CLI_PAGE.read_text()

    for heading in (
        "## `billing-worker up`",
        "### `billing-worker subscriptions show`",
        "#### `billing-worker stripe webhooks register`",
    ):
        assert heading in page
    assert "BILLING_DATABASE_LOCK_TIMEOUT_SECONDS" in page  # the env list of each command
