"""``billing-worker audit``: the operators' audit trail, newest first: who took which action,
when, why, on what, and what it changed."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from worker.cli.base import DATABASE_ENV, BillingCommand, services
from worker.cli.tables import echo_list, when

_SPAN = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


class Since(click.ParamType[datetime | timedelta, str]):
    """A moment: an ISO 8601 date or time (UTC unless it says otherwise), or a span back from
    now on the application's clock (``30m``, ``12h``, ``7d``)."""

    name = "since"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime | timedelta:
        if isinstance(value, (datetime, timedelta)):
            return value
        text = str(value).strip()
        span = _SPAN.match(text)
        if span:
            return timedelta(**{_UNITS[span[2]]: int(span[1])})
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            self.fail(f"{text!r} is neither a span (30m, 12h, 7d) nor an ISO 8601 time", param, ctx)
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@click.command("audit", cls=BillingCommand, settings_env=DATABASE_ENV)
@click.option(
    "--target",
    help="Only the entries of this target: a billing account's id (its entries, whatever they "
    "acted on), a command's, a change's... or TYPE:ID.",
)
@click.option("--operator", help="Only this operator's (an API client's id, or a CLI's name).")
@click.option("--action", help="Only this action (replay-command, mark-offline, skip-change...).")
@click.option("--since", type=Since(), help="Only from then on: 30m, 12h, 7d, or an ISO time.")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def audit(
    target: str | None,
    operator: str | None,
    action: str | None,
    since: datetime | timedelta | None,
    limit: int,
    as_json: bool,
) -> None:
    """The operators' audit trail, newest first: every action taken from the console, the
    operations API or the command line, with who took it, when (the application's clock),
    why, what it targeted and what it changed."""
    from application.handlers.operations.audit import ListAudit, audit_entries
    from domain.operations.audit import AuditFilter

    svc = services()
    if isinstance(since, timedelta):
        since = svc.clock.now() - since
    wanted = AuditFilter(target=target, operator=operator, action=action, since=since)
    entries = audit_entries(ListAudit(wanted, limit), svc)
    if as_json:
        click.echo(json.dumps([entry.model_dump(mode="json") for entry in entries], indent=2))
        return
    echo_list(
        ("AT (UTC)", "ACTION", "OPERATOR", "VIA", "TARGETS", "WHY", "CHANGED"),
        [
            (
                when(entry.at),
                entry.action,
                entry.operator,
                entry.surface,
                " ".join(entry.targets),
                entry.reason,
                "; ".join(entry.changes),
            )
            for entry in entries
        ],
        empty="no audit entries" + (" match" if wanted != AuditFilter() else ""),
    )
