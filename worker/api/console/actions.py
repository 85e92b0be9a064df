"""The console's actions: what the CLI's operators do (``commands replay``, ``commands retry``,
``accounts retry``, ``accounts mark-offline``, ``subscriptions skip-change``,
``dead-letters replay``, ``stripe drift --adopt``), each from the browser in two steps.

``GET /console/actions/{kind}/{target}`` shows what the action will do to what, as it is
now, and a form; ``POST`` to the same address takes it. Both need ``operations:write``. The
POST carries a CSRF token (``csrf.py``) the form got from the confirmation page, and its
``Origin`` must be the console's: a form another site makes a signed-in browser post is
refused with a 403 page, and nothing changes. The action runs its use case, the one the CLI
runs (each kind's subject and use case: ``action_kinds.py``), and the result page links back
to what it acted on.
"""

from __future__ import annotations

import html
import logging
import re
from urllib.parse import parse_qs

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from domain.errors import CommandError, NotFound, TransientError, violations_of
from domain.messages import ID_PATTERN
from domain.operations.console import AccountStory, SubscriptionStory
from domain.permissions import Scope
from worker.api.auth import Caller
from worker.api.console.access import Operator
from worker.api.console.action_kinds import ACTION_KINDS, FAILURES, Action
from worker.api.console.csrf import FIELD, CsrfTokens, Forbidden, check_origin, console_secret
from worker.api.console.layout import (
    PREFIX,
    facts,
    link,
    message_page,
    page,
    section,
    text,
    url,
)
from worker.api.errors import ApiError
from worker.api.state import State
from worker.bootstrap import Services

logger = logging.getLogger(__name__)
router = APIRouter()

ACTIONS = f"{PREFIX}/actions"
TARGET = re.compile(ID_PATTERN)
CONFIRMATION_HEADERS = {
    # The console's pages send no Referer; a POST from this page must still say where it
    # comes from (a browser sends ``Origin: null`` under ``no-referrer``), to this origin only.
    "Referrer-Policy": "same-origin"
}


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
    from adapters.messaging.redis_clients import redis_client

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
