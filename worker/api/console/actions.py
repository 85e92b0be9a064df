"""The console's actions: what the CLI's operators do (``commands replay``, ``commands retry``,
``accounts retry``, ``accounts mark-offline``, ``subscriptions skip-change``,
``dead-letters replay``, ``stripe drift --adopt``), each from the browser in two steps.

``GET /console/actions/{kind}/{target}`` shows what the action will do to what, as it is
now, and a form; ``POST`` to the same address takes it. Both need ``operations:write``. The
POST carries a CSRF token (``csrf.py``) the form got from the confirmation page, and its
``Origin`` must be the console's: a form another site makes a signed-in browser post is
refused with a 403 page, and nothing changes. The action runs its use case, the one the CLI
runs (``application/handlers/operations.py``, ``worker/messaging/dead_letter_replay.py``,
``application/handlers/drift.py``),
and the result page links back to what it acted on.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from application.handlers import operations as handlers
from application.handlers.drift import adopt_findings, drift_report
from application.requests.operator_actions import (
    MarkAccountOffline,
    ReplayCommands,
    RetryCommand,
    RetryRegistration,
    SkipScheduledChange,
    new_action_id,
)
from application.requests.operator_requests import AdoptFindings, ReportDrift
from domain.drift.report import Finding
from domain.errors import CommandError, NotFound, TransientError, violations_of
from domain.messages import ID_PATTERN
from domain.operations.console import AccountStory, SubscriptionStory
from domain.operations.outcomes import error_line
from domain.permissions import Scope
from worker.api.auth import Caller
from worker.api.console.access import Operator
from worker.api.console.csrf import FIELD, CsrfTokens, Forbidden, check_origin, console_secret
from worker.api.console.layout import (
    PREFIX,
    badge,
    facts,
    link,
    message_page,
    page,
    section,
    text,
    url,
    when,
)
from worker.api.errors import ApiError
from worker.api.state import State
from worker.bootstrap import Services

logger = logging.getLogger(__name__)
router = APIRouter()

ACTIONS = f"{PREFIX}/actions"
FAILURES = f"{PREFIX}/failures"
TARGET = re.compile(ID_PATTERN)
CONFIRMATION_HEADERS = {
    # The console's pages send no Referer; a POST from this page must still say where it
    # comes from (a browser sends ``Origin: null`` under ``no-referrer``), to this origin only.
    "Referrer-Policy": "same-origin"
}


@dataclass(frozen=True)
class Subject:
    """What an action acts on, as its confirmation page shows it."""

    facts: list[tuple[str, str]]
    back: str
    """The page of the thing acted on."""
    back_label: str


@dataclass(frozen=True)
class Action:
    """One action: its page's wording, how its subject is read, and how it is taken (the
    use case, given the services, the caller, the target and the operator's reason; it
    answers one line saying what it did)."""

    title: str
    does: str
    """What taking it does, for the confirmation page."""
    read: Callable[[Services, str], Subject]
    take: Callable[[Services, Caller, str, str], str]
    takes_reason: bool = True


def may_act(caller: Caller) -> bool:
    """Whether ``caller`` may take actions (pages show it no action button otherwise)."""
    try:
        caller.grant.check(Scope.OPERATIONS_WRITE)
    except CommandError:
        return False
    return True


def action_url(kind: str, target: str) -> str:
    """The confirmation page of action ``kind`` on ``target``."""
    return url("actions", kind, target)


def action_button(caller: Caller, kind: str, target: str, label: str | None = None) -> str:
    """A link to the action's confirmation page, for a caller who may take it; else ""."""
    if not may_act(caller) or kind not in ACTION_KINDS:
        return ""
    shown = label or ACTION_KINDS[kind].title
    href = html.escape(action_url(kind, target), quote=True)
    return f'<a class="button" href="{href}">{text(shown)}</a>'


def account_actions(caller: Caller, story: AccountStory) -> str:
    """The account page's actions, for a caller who may take them: a ``pending`` account's
    registration retried or the account marked offline, and its failed commands replayed."""
    if not may_act(caller):
        return ""
    account_id = str(story.billing_account["id"])
    buttons = []
    if story.billing_account.get("state") == "pending":
        buttons.append(action_button(caller, "retry-registration", account_id))
        buttons.append(action_button(caller, "mark-offline", account_id))
    for command in story.commands:
        if command.status == "failed":
            label = f"Replay {command.type} {command.id}"
            buttons.append(action_button(caller, "replay-command", command.id, label))
        elif command.status in ("retrying", "waiting"):
            label = f"Retry {command.type} {command.id} now"
            buttons.append(action_button(caller, "retry-command", command.id, label))
    if not buttons:
        return ""
    return section("Actions", f'<p class="actions">{" ".join(buttons)}</p>', id="actions")


def subscription_actions(caller: Caller, story: SubscriptionStory) -> str:
    """The subscription page's actions, for a caller who may take them: each ``scheduled``
    plan change skipped."""
    if not may_act(caller):
        return ""
    buttons = [
        action_button(caller, "skip-change", str(change["id"]), f"Skip change {change['id']}")
        for change in story.changes
        if change.get("state") == "scheduled"
    ]
    if not buttons:
        return ""
    return section("Actions", f'<p class="actions">{" ".join(buttons)}</p>', id="actions")


# Subjects


def account_page(account_or_org: str) -> str:
    return url("accounts", account_or_org)


def _command_subject(svc: Services, command_id: str) -> Subject:
    record = svc.commands.get(command_id)
    if record is None:
        raise NotFound.resource("command", command_id)
    payload = record.payload or {}
    owner = payload.get("billing_account_id") or payload.get("org_id")
    back = account_page(str(owner)) if owner else f"{FAILURES}#failed"
    return Subject(
        facts=[
            ("Command", f'<span class="mono">{text(record.id)}</span>'),
            ("Type", text(record.type)),
            ("Status", badge(record.status.value)),
            ("Attempts", text(record.attempts)),
            ("Updated", when(record.finished_at or record.updated_at)),
            ("Why", text(error_line(record.error) if record.error else "")),
        ],
        back=back,
        back_label=f"the account {owner}" if owner else "the failures",
    )


def _account_subject(svc: Services, account_id: str) -> Subject:
    story = svc.console().account_story(account_id)
    if story is None:
        raise NotFound.resource("billing_account", account_id)
    account = story.billing_account
    return Subject(
        facts=[
            ("Account", f'<span class="mono">{text(account["id"])}</span>'),
            ("Organization", text(account.get("org_id"))),
            ("State", badge(account.get("state"))),
            ("Stripe customer", text(story.provider_customer_id or "none yet")),
            ("Idempotency key", f'<span class="mono">{text(story.registration_key)}</span>'),
        ],
        back=account_page(str(account["id"])),
        back_label=f"the account {account['id']}",
    )


def _change_subject(svc: Services, change_id: str) -> Subject:
    with svc.unit_of_work() as uow:
        change = uow.scheduled_changes.get(change_id)
    if change is None:
        raise NotFound.resource("scheduled_change", change_id)
    return Subject(
        facts=[
            ("Change", f'<span class="mono">{text(change.id)}</span>'),
            ("Subscription", text(change.subscription_id)),
            ("To plan", text(change.target_plan_id)),
            ("State", badge(change.state.value)),
            ("Effective", when(change.effective_at)),
        ],
        back=url("subscriptions", change.subscription_id),
        back_label=f"the subscription {change.subscription_id}",
    )


def _letter_subject(svc: Services, letter_id: str) -> Subject:
    letter = _dead_letters(svc).get(letter_id)
    if letter is None:
        raise NotFound.resource("dead_letter", letter_id)
    return Subject(
        facts=[
            ("Dead letter", f'<span class="mono">{text(letter.id)}</span>'),
            ("At", when(letter.at)),
            ("Queue", text(letter.queue)),
            ("Task", text(letter.task or "-")),
            ("Size", text(f"{letter.size} B")),
            ("Why", text(letter.reason)),
        ],
        back=f"{FAILURES}#dead-letters",
        back_label="the dead letters",
    )


def finding_key(finding: Finding) -> str:
    """A drift finding's name in an action's address: its kind and the ids it involves."""
    return ":".join((finding.kind.value, *finding.ids))


def _finding(svc: Services, key: str) -> Finding:
    """The finding of the drift report read now that ``key`` names (the report the CLI's
    ``stripe drift`` reads; the money check is left out: its findings are never adoptable)."""
    for finding in drift_report(ReportDrift(read_invoices=False), svc):
        if finding_key(finding) == key:
            return finding
    raise NotFound(f"no drift {key!r} now: it was adopted or put right meanwhile")


def _drift_subject(svc: Services, key: str) -> Subject:
    finding = _finding(svc, key)
    return Subject(
        facts=[
            ("Kind", badge(finding.kind.value)),
            ("Ids", " ".join(f'<span class="mono">{text(i)}</span>' for i in finding.ids)),
            ("What differs", text(finding.description)),
            ("Adopting", text(finding.action)),
        ],
        back=f"{FAILURES}/drift",
        back_label="the drift report",
    )


def _dead_letters(svc: Services) -> Any:
    from worker.messaging.dead_letters import DeadLetters
    from worker.messaging.redis_clients import redis_client

    return DeadLetters(redis_client(svc.settings))


# What each action runs: the CLI's use case.


def _replay_command(svc: Services, caller: Caller, command_id: str, reason: str) -> str:
    action = ReplayCommands(
        command_id=new_action_id("replay-commands"),
        target_command_ids=[command_id],
        reason=reason,
    )
    (taken,) = handlers.replay_commands(action, svc)
    return f"command {command_id} is {taken.state} again: a worker runs it under its own id"


def _retry_command(svc: Services, caller: Caller, command_id: str, reason: str) -> str:
    action = RetryCommand(
        command_id=new_action_id("retry-command"), target_command_id=command_id, reason=reason
    )
    taken = handlers.retry_command(action, svc)
    return f"command {command_id} sent again now ({taken.state})"


def _retry_registration(svc: Services, caller: Caller, account_id: str, reason: str) -> str:
    action = RetryRegistration(
        command_id=new_action_id("retry-registration"),
        billing_account_id=account_id,
        reason=reason,
    )
    taken = handlers.retry_registration(action, svc)
    return f"the registration of {account_id} was sent as {taken.sent_command_id}"


def _mark_offline(svc: Services, caller: Caller, account_id: str, reason: str) -> str:
    action = MarkAccountOffline(
        command_id=new_action_id("mark-offline"), billing_account_id=account_id, reason=reason
    )
    taken = handlers.mark_account_offline(action, svc)
    said = "marked offline" if taken.changed else "was offline already"
    return f"{account_id} {said}: it is {taken.state}"


def _skip_change(svc: Services, caller: Caller, change_id: str, reason: str) -> str:
    action = SkipScheduledChange(
        command_id=new_action_id("skip-change"), change_id=change_id, reason=reason
    )
    taken = handlers.skip_scheduled_change(action, svc)
    return f"change {change_id} " + ("skipped" if taken.changed else "was skipped already")


def _replay_letter(svc: Services, caller: Caller, letter_id: str, reason: str) -> str:
    from worker.messaging.dead_letter_replay import replay_dead_letter, worker_task_names
    from worker.messaging.redis_clients import redis_client

    letter = replay_dead_letter(
        _dead_letters(svc),
        redis_client(svc.settings),
        letter_id,
        worker_task_names(svc.celery_app()),
    )
    return f"dead letter {letter_id} put back on {letter.queue}"


def _adopt(svc: Services, caller: Caller, key: str, reason: str) -> str:
    (adoption,) = adopt_findings(AdoptFindings([_finding(svc, key)]), svc)
    return f"{adoption.finding.kind.value} {' '.join(adoption.finding.ids)}: {adoption.outcome}"


ACTION_KINDS: dict[str, Action] = {
    "replay-command": Action(
        "Replay the command",
        "The command is made queued again and published under its own id; a worker runs it "
        "as it ran before. What it did already is not done twice: its Stripe calls reuse their "
        "idempotency keys. A rejected command is refused (it was the caller's mistake).",
        _command_subject,
        _replay_command,
    ),
    "retry-command": Action(
        "Retry the command now",
        "The command, waiting for its next retry or its turn, is sent again now under its own "
        "id; the delivery already waiting finds it done and does nothing twice.",
        _command_subject,
        _retry_command,
    ),
    "retry-registration": Action(
        "Retry the registration",
        "The pending account's registration with Stripe is sent again now, under its stored "
        "idempotency key: one customer however often it runs.",
        _account_subject,
        _retry_registration,
    ),
    "mark-offline": Action(
        "Mark the account offline",
        "The pending account becomes active without Stripe (its registration is abandoned; it "
        "can be registered later). A registration still retrying registers it all the same: "
        "mark it offline once its command has failed.",
        _account_subject,
        _mark_offline,
    ),
    "skip-change": Action(
        "Skip the plan change",
        "The scheduled plan change is skipped: it will not be made. A staged change (made at "
        "Stripe already) or one being applied is refused.",
        _change_subject,
        _skip_change,
    ),
    "replay-dead-letter": Action(
        "Replay the dead letter",
        "The message is put back on its queue, if a worker can take it now, and the letter "
        "is dropped. One that still cannot be taken is refused and kept.",
        _letter_subject,
        _replay_letter,
        takes_reason=False,
    ),
    "adopt-drift": Action(
        "Adopt the drift",
        "The difference is linked as the drift report says (stripe drift --adopt, for this "
        "finding only), in its own transaction, after checking again that nothing linked it "
        "meanwhile.",
        _drift_subject,
        _adopt,
        takes_reason=False,
    ),
}


# Pages


def _tokens(request: Request, svc: Services) -> CsrfTokens:
    """The app's token issuer, made at first use (the secret may be read from Redis)."""
    tokens: CsrfTokens | None = getattr(request.app.state, "console_csrf", None)
    if tokens is None:
        configured = svc.settings.console_csrf_secret
        tokens = CsrfTokens(
            console_secret(
                configured.get_secret_value() if configured else None,
                lambda key, candidate: _kept_secret(svc, key, candidate),
            )
        )
        request.app.state.console_csrf = tokens
    return tokens


def _kept_secret(svc: Services, key: str, candidate: bytes) -> bytes:
    from worker.messaging.redis_clients import redis_client

    client = redis_client(svc.settings)
    client.set(key, candidate, nx=True)
    kept = client.get(key)
    if isinstance(kept, str):
        return kept.encode()
    return kept or candidate


class MalformedForm(Exception):
    """A POST whose body is not the confirmation page's form."""


def _form_fields(body: bytes) -> dict[str, list[str]]:
    try:
        return parse_qs(body.decode("utf-8", "replace"), max_num_fields=MAX_FORM_FIELDS)
    except ValueError:
        raise MalformedForm(f"the form has more than {MAX_FORM_FIELDS} fields") from None


MAX_FORM_FIELDS = 8


def _checked(kind: str, target: str) -> Action:
    action = ACTION_KINDS.get(kind)
    if action is None or len(target) > 128 or not TARGET.match(target):
        raise NotFound(f"no action {kind!r} on {target!r}")
    return action


def _refusal(error: BaseException, doing: str) -> HTMLResponse:
    """The page of an action (or a read) that could not be done, with the status the API
    answers for that error; never a traceback."""
    if isinstance(error, Forbidden):
        return message_page("Refused", f"{error} (nothing was changed)", status=403)
    if isinstance(error, CommandError):
        refused = ApiError.of(error)
        title = "Not found" if refused.status == 404 else "Not done"
        return message_page(title, f"{doing}: {error.message}", status=refused.status)
    if isinstance(error, MalformedForm):
        return message_page("Not done", f"{doing}: {error} (nothing was changed)", status=400)
    if isinstance(error, ValidationError):
        why = "; ".join(f"{f}: {w}" for f, w in violations_of(error.errors(include_url=False)))
        return message_page("Not done", f"{doing}: {why}", status=400)
    if isinstance(error, TransientError) or Services.is_transient(error):
        message = error.message if isinstance(error, TransientError) else str(error)
        return message_page("Unavailable", f"{doing}: {message} (try again)", status=503)
    logger.exception("console: %s failed", doing, exc_info=error)
    return message_page(
        "Not done", f"{doing}: unexpected {type(error).__name__} (see the API's log)", status=500
    )


def _form(action: Action, kind: str, target: str, token: str) -> str:
    reason = (
        "<p><label>Why (kept with what it changes) "
        '<input type="text" name="reason" maxlength="200" size="60"></label></p>'
        if action.takes_reason
        else ""
    )
    address = html.escape(action_url(kind, target), quote=True)
    return (
        f'<form method="post" action="{address}" class="confirm">'
        f'<input type="hidden" name="{FIELD}" value="{html.escape(token, quote=True)}">'
        f"{reason}"
        f'<p><button type="submit">{text(action.title)}</button></p></form>'
    )


@router.get(f"{ACTIONS}/{{kind}}/{{target}}")
async def confirm_action(
    kind: str, target: str, request: Request, caller: Operator, state: State
) -> HTMLResponse:
    svc = state.svc
    try:
        action = _checked(kind, target)
        subject = await to_thread.run_sync(lambda: action.read(svc, target))
        token = await to_thread.run_sync(lambda: _tokens(request, svc).issue(caller.client_id))
    except Exception as error:
        return _refusal(error, f"cannot read {target}")
    body = (
        f'<p class="does">{text(action.does)}</p>'
        f"{facts(subject.facts)}"
        f"{_form(action, kind, target, token)}"
        f'<p class="pager">{link(subject.back, "Cancel: back to " + subject.back_label)}</p>'
    )
    return page(action.title, body, nav="failures", headers=CONFIRMATION_HEADERS)


@router.post(f"{ACTIONS}/{{kind}}/{{target}}")
async def take_action(
    kind: str, target: str, request: Request, caller: Operator, state: State
) -> HTMLResponse:
    svc = state.svc
    try:
        action = _checked(kind, target)
        check_origin(request.headers, request.headers.get("host"))
        form = _form_fields(await request.body())
        tokens = await to_thread.run_sync(lambda: _tokens(request, svc))
        tokens.check(caller.client_id, next(iter(form.get(FIELD, [])), None))
        reason = (form.get("reason") or [""])[0]
        subject = await to_thread.run_sync(lambda: action.read(svc, target))
        said = await to_thread.run_sync(lambda: action.take(svc, caller, target, reason))
    except Exception as error:
        return _refusal(error, f"{kind} {target}")
    logger.info("console: %s took %s on %s", caller.client_id, kind, target)
    body = (
        f'<p class="message done">{text(said)}.</p>'
        f'<p class="pager">{link(subject.back, "Back to " + subject.back_label)} · '
        f"{link(FAILURES, 'Back to the failures')}</p>"
    )
    return page("Done", body, nav="failures")
