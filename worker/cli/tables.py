"""How the console prints rows: aligned columns under a header, and times; shared by the
lists and the stories (``accounts show``, ``subscriptions show``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import click

from domain.operations.console import CommandView


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A header row, then one row per item, in columns as wide as their widest cell, two
    spaces apart."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (headers, *rows)
    )


def echo_list(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, empty: str) -> None:
    """Every list command's text output: a table under its header, or ``empty`` saying there
    is nothing (never a silent, empty answer)."""
    click.echo(table(headers, rows) if rows else empty)


def when(value: datetime | None) -> str:
    return "" if value is None else f"{value:%Y-%m-%d %H:%M:%S}"


COMMAND_HEADERS = ("ID", "TYPE", "STATUS", "ATTEMPTS", "CREATED", "NEXT RETRY", "LAST ERROR")


def command_row(item: CommandView) -> list[str]:
    return [
        item.id,
        item.type,
        item.status,
        str(item.attempts),
        when(item.created_at),
        when(item.next_retry_at),
        (item.last_error or "")[:80],
    ]
