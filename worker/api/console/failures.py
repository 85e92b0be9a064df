"""``/console/failures``: what needs an operator, each with why and what can be done.

Failed commands (``commands failed``), rejected ones (``commands rejected``: the callers'
mistakes, shown with why and never replayed), commands waiting for a retry, accounts stuck
``pending``, dead letters (``dead-letters list``), each read by the use case the CLI runs;
and ``/console/failures/drift``, the drift report (``stripe drift``), run when asked (it reads
every customer and subscription at Stripe). A client holding ``operations:write`` sees, beside
each, the buttons of the actions the CLI has for it; each leads to its confirmation page
(``actions.py``). A part that cannot be read says so, and the others are still shown.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from anyio import to_thread
from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from application.handlers.drift.report import drift_report
from application.requests.operator_requests import ReportDrift
from domain.errors import CommandError
from domain.operations.outcomes import error_line
from worker.api.auth import Caller
from worker.api.console.access import Viewer
from worker.api.console.action_kinds import FAILURES, account_page
from worker.api.console.actions import action_button, may_act
from worker.api.console.layout import (
    badge,
    link,
    page,
    section,
    table,
    text,
    when,
)
from worker.api.console.timeline import command_link
from worker.api.state import State
from worker.bootstrap import Services

logger = logging.getLogger(__name__)
router = APIRouter()
T = TypeVar("T")

SHOWN = 50


class Unreadable(Exception):
    """A part of the page that could not be read, and why (shown in its place)."""


def _read(part: str, read: Callable[[], T]) -> T:
    try:
        return read()
    except CommandError as refused:
        raise Unreadable(f"the {part} could not be read: {refused.message}") from None
    except Exception as error:
        logger.warning("console: could not read the %s", part, exc_info=True)
        raise Unreadable(f"the {part} could not be read ({type(error).__name__})") from None


def _part(title: str, anchor: str, build: Callable[[], str]) -> str:
    try:
        body = build()
    except Unreadable as why:
        body = f'<p class="empty">{text(why)}</p>'
    return section(title, body, id=anchor)


def _mono(value: object) -> str:
    return f'<span class="mono">{text(value)}</span>'


def _owner(payload: dict[str, Any]) -> str:
    """A link to the account (or organization) a command names, if it names one."""
    owner = payload.get("billing_account_id") or payload.get("org_id")
    return link(account_page(str(owner)), owner) if owner else ""


def _buttons(*buttons: str) -> str:
    return " ".join(button for button in buttons if button)


def _finished(svc: Services, caller: Caller, status: str) -> str:
    log = svc.commands
    records = _read(
        f"{status} commands",
        lambda: log.list_failed(SHOWN) if status == "failed" else log.list_rejected(SHOWN),
    )
    headers = ["Command", "Type", "Finished (UTC)", "Why", "Account"]
    acting = status == "failed" and may_act(caller)
    if acting:
        headers.append("Action")
    rows = []
    for record in records:
        row = [
            command_link(record.id),
            text(record.type),
            when(record.finished_at or record.updated_at),
            text(error_line(record.error or {})),
            _owner(record.payload or {}),
        ]
        if acting:
            row.append(action_button(caller, "replay-command", record.id, "Replay"))
        rows.append(row)
    note = (
        "<p>Each failed for an operator: a dependency down for its whole retry budget, or "
        "our own fault. Fix the cause, then replay it (same id: nothing is done twice).</p>"
        if status == "failed"
        else "<p>The callers' mistakes (invalid, not found, a conflict, not permitted, refused "
        "by Stripe for their data): the caller sends a corrected command; none is replayed."
        "</p>"
    )
    return note + table(headers, rows, f"no {status} commands")


def _waiting(svc: Services, caller: Caller) -> str:
    commands = _read(
        "commands waiting for a retry",
        lambda: svc.console().commands(
            statuses=["retrying", "waiting"], command_type=None, limit=SHOWN, after=None
        ),
    )
    acting = may_act(caller)
    headers = ["Command", "Type", "Status", "Attempts", "Next retry", "Last error"]
    if acting:
        headers.append("Action")
    rows = []
    for command in commands.items:
        row = [
            command_link(command.id),
            text(command.type),
            badge(command.status),
            text(command.attempts),
            when(command.next_retry_at),
            text(command.last_error),
        ]
        if acting:
            row.append(action_button(caller, "retry-command", command.id, "Retry now"))
        rows.append(row)
    return table(headers, rows, "no command is waiting for a retry")


def _pending(svc: Services, caller: Caller) -> str:
    accounts = _read(
        "pending accounts",
        lambda: svc.console().billing_accounts(
            state="pending", org_id=None, limit=SHOWN, after=None
        ),
    )
    acting = may_act(caller)
    headers = ["Account", "Organization", "State", "Created"]
    if acting:
        headers.append("Actions")
    rows = []
    for account in accounts.items:
        row = [
            link(account_page(account.id), account.id),
            link(account_page(account.org_id), account.org_id),
            badge(account.state),
            when(account.created_at),
        ]
        if acting:
            row.append(
                _buttons(
                    action_button(caller, "retry-registration", account.id, "Retry registration"),
                    action_button(caller, "mark-offline", account.id, "Mark offline"),
                )
            )
        rows.append(row)
    return table(headers, rows, "no account is pending")


def _dead_letters(svc: Services, caller: Caller) -> str:
    from adapters.messaging.dead_letters import DeadLetters
    from adapters.messaging.redis_clients import redis_client

    store = DeadLetters(redis_client(svc.settings), shiftable_clock=svc.settings.shiftable_clock)
    letters = _read("dead letters", lambda: store.list(SHOWN))
    kept, total = _read("dead letters", lambda: (store.count(), store.total()))
    acting = may_act(caller)
    headers = ["Dead letter", "At (UTC)", "Queue", "Size", "Task", "Why"]
    if acting:
        headers.append("Action")
    rows = []
    for letter in letters:
        row = [
            _mono(letter.id),
            when(letter.at),
            text(letter.queue),
            text(f"{letter.size} B"),
            text(letter.task or "-"),
            text(letter.reason),
        ]
        if acting:
            row.append(action_button(caller, "replay-dead-letter", letter.id, "Replay"))
        rows.append(row)
    note = (
        "<p>Messages no worker could take from a queue: undecodable, malformed, oversized, of "
        f"an unknown task, or reusing another command's id. {text(kept)} kept "
        f"({text(total)} recorded in all).</p>"
    )
    return note + table(headers, rows, "no dead letters kept")


def _drift(svc: Services, caller: Caller, read_invoices: bool) -> str:
    findings = _read(
        "drift report (Stripe)", lambda: drift_report(ReportDrift(read_invoices=read_invoices), svc)
    )
    acting = may_act(caller)
    headers = ["Kind", "Adoptable", "Ids", "What differs", "What to do"]
    if acting:
        headers.append("Action")
    rows = []
    for finding in findings:
        row = [
            badge(finding.kind.value),
            "yes" if finding.adoptable else "no",
            " ".join(_mono(value) for value in finding.ids),
            text(finding.description),
            text(finding.action),
        ]
        if acting:
            adopt = action_button(caller, "adopt-drift", finding.key, "Adopt")
            row.append(adopt if finding.adoptable else "")
        rows.append(row)
    scope = (
        "Every customer and subscription at Stripe compared with the database, with the "
        "latest renewal invoices' money"
        if read_invoices
        else "Every customer and subscription at Stripe compared with the database ("
        + link(DRIFT + "?invoices=1", "with the money check too")
        + ": one Stripe read per subscription)"
    )
    adoptable = sum(1 for finding in findings if finding.adoptable)
    summary = (
        f"<p>{text(len(findings))} found: {text(adoptable)} adoptable "
        "(each here, or all: <code>billing-worker stripe drift --adopt</code>), "
        f"{text(len(findings) - adoptable)} need a person.</p>"
        if findings
        else ""
    )
    return f"<p>{scope}.</p>" + table(headers, rows, "no drift found") + summary


def failures_body(svc: Services, caller: Caller) -> str:
    return "".join(
        (
            _part("Failed commands", "failed", lambda: _finished(svc, caller, "failed")),
            _part("Waiting for a retry", "retrying", lambda: _waiting(svc, caller)),
            _part("Accounts stuck pending", "pending", lambda: _pending(svc, caller)),
            _part("Dead letters", "dead-letters", lambda: _dead_letters(svc, caller)),
            _part("Rejected commands", "rejected", lambda: _finished(svc, caller, "rejected")),
            section("Drift", DRIFT_INVITATION, id="drift"),
        )
    )


DRIFT = f"{FAILURES}/drift"
DRIFT_INVITATION = (
    "<p>The drift report compares every customer and subscription at Stripe with the "
    "database (<code>billing-worker stripe drift</code>). It reads all of them from Stripe, "
    "so it runs when asked: " + link(DRIFT, "Run the drift report") + ".</p>"
)


@router.get(FAILURES)
async def failures_page(caller: Viewer, state: State) -> HTMLResponse:
    body = await to_thread.run_sync(lambda: failures_body(state.svc, caller))
    return page("Failures", body, nav="failures")


@router.get(DRIFT)
async def drift_page(caller: Viewer, state: State, invoices: str = "") -> HTMLResponse:
    """The drift report, read from Stripe now (with the money check for ``invoices=1``)."""
    body = await to_thread.run_sync(
        lambda: _part("Findings", "drift", lambda: _drift(state.svc, caller, invoices == "1"))
    )
    return page("Drift", body, nav="failures")
