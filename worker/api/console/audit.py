"""The console's audit page (``/console/audit``): the operators' audit trail, newest first,
filtered as ``billing-worker audit`` filters it (by target, operator, action and since)."""

from __future__ import annotations

import html
from datetime import UTC, datetime

from anyio import to_thread
from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from application.handlers.operations.audit import ListAudit, audit_entries
from domain.operations.audit import AUDIT_PAGE_SIZE, AuditEntry, AuditFilter
from worker.api.console.access import Viewer
from worker.api.console.action_kinds import account_page
from worker.api.console.layout import PREFIX, link, message_page, page, table, text, when
from worker.api.state import State

router = APIRouter()

AUDIT = f"{PREFIX}/audit"
FIELDS = (
    ("target", "Target (an account's id, a command's, TYPE:ID)"),
    ("operator", "Operator"),
    ("action", "Action"),
    ("since", "Since (ISO time, UTC)"),
)


def _row(entry: AuditEntry) -> list[str]:
    targets = " ".join(f"<code>{text(target)}</code>" for target in entry.targets)
    if entry.billing_account_id:
        targets += " · " + link(account_page(entry.billing_account_id), "the account")
    return [
        when(entry.at),
        text(entry.action),
        f"{text(entry.operator)} ({text(entry.surface)})",
        targets,
        text(entry.reason),
        "<br>".join(text(change) for change in entry.changes),
    ]


def _form(given: dict[str, str]) -> str:
    fields = "".join(
        f'<label>{text(label)} <input type="text" name="{name}" maxlength="200" '
        f'value="{html.escape(given.get(name, ""), quote=True)}"></label> '
        for name, label in FIELDS
    )
    return (
        f'<form method="get" action="{AUDIT}" class="filters"><p>{fields}'
        '<button type="submit">Filter</button></p></form>'
    )


def _since(value: str) -> datetime | None:
    if not value:
        return None
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@router.get(AUDIT)
async def audit_page(
    caller: Viewer,
    state: State,
    target: str = "",
    operator: str = "",
    action: str = "",
    since: str = "",
) -> HTMLResponse:
    """Every action an operator took, who took it, when, why, on what and what it changed."""
    given = {"target": target, "operator": operator, "action": action, "since": since}
    try:
        wanted = AuditFilter(
            target=target.strip() or None,
            operator=operator.strip() or None,
            action=action.strip() or None,
            since=_since(since.strip()),
        )
    except ValueError:
        return message_page("Not done", f"since: {since!r} is not an ISO time", status=400)
    entries = await to_thread.run_sync(
        lambda: audit_entries(ListAudit(wanted, AUDIT_PAGE_SIZE), state.svc)
    )
    headers = ("When (UTC)", "Action", "Operator", "Targets", "Why", "What it changed")
    shown = table(headers, [_row(entry) for entry in entries], "no audit entries")
    note = (
        f'<p class="pager">The newest {AUDIT_PAGE_SIZE}; '
        "<code>billing-worker audit --limit N</code> lists more.</p>"
        if len(entries) == AUDIT_PAGE_SIZE
        else ""
    )
    return page("Audit", _form(given) + shown + note, nav="audit")
