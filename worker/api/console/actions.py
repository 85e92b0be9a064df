"""The console's actions: what the CLI's operators do (``commands replay``, ``commands retry``,
``accounts retry``, ``accounts mark-offline``, ``subscriptions skip-change``,
``dead-letters replay``, ``stripe drift --adopt``), each from the browser in two steps.

``GET /console/actions/{kind}/{target}`` shows what the action will do to what, as it is
now, and a form; ``POST`` to the same address takes it. Both need ``operations:write``. The
POST is a form (``application/x-www-form-urlencoded``, as a browser posts the page's; any
other body is refused with a 415 page), carries the CSRF token the confirmation page issued
for that client, that action and that target (``csrf.py``), taken once, and its ``Origin``
must be the console's: a form another site makes a signed-in browser post, or a confirmed
form posted again, is refused with a 403 page, and nothing changes. The actions are
those of the table the API and the CLI offer too (``application/operator_actions.py``: each
one's wording, scope, reason and use case), taken through its ``take``; what each acts on is
read for its page by ``action_kinds.py``, and the result page links back to it.
"""

from __future__ import annotations

import html
import logging
import re
from typing import Any
from urllib.parse import parse_qs

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from application.operator_actions import (
    REASON_LABELS,
    ActionKind,
    Surface,
    offered_by,
    require_reason,
    take,
)
from domain.errors import CommandError, NotFound, TransientError, violations_of
from domain.messages import ID_PATTERN
from domain.operations.console import AccountStory, SubscriptionStory
from domain.permissions import Scope
from worker.api.auth import Caller
from worker.api.console.access import Operator
from worker.api.console.action_kinds import FAILURES, SUBJECTS
from worker.api.console.csrf import (
    FIELD,
    CsrfTokens,
    FirstUse,
    Forbidden,
    UseUncheckable,
    check_origin,
    console_secret,
)
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

ACTION_KINDS: dict[str, ActionKind[Any, Any]] = {a.kind: a for a in offered_by(Surface.CONSOLE)}
"""The console's actions, by kind: the table's that the console offers."""

ACTIONS = f"{PREFIX}/actions"
TARGET = re.compile(ID_PATTERN)
CONFIRMATION_HEADERS = {
    # The console's pages send no Referer; a POST from this page must still say where it
    # comes from (a browser sends ``Origin: null`` under ``no-referrer``), to this origin only.
    "Referrer-Policy": "same-origin"
}


def may_act(caller: Caller, scope: Scope = Scope.OPERATIONS_WRITE) -> bool:
    """Whether ``caller`` may take actions (of ``scope``; pages show it no action button
    otherwise)."""
    try:
        caller.grant.check(scope)
    except CommandError:
        return False
    return True


def action_url(kind: str, target: str) -> str:
    """The confirmation page of action ``kind`` on ``target``."""
    return url("actions", kind, target)


def action_button(caller: Caller, kind: str, target: str, label: str | None = None) -> str:
    """A link to the action's confirmation page, for a caller who may take it; else ""."""
    if kind not in ACTION_KINDS or not may_act(caller, ACTION_KINDS[kind].scope):
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


def _first_use(request: Request, svc: Services) -> FirstUse:
    """Records a token's use in Redis (``SET NX EX``), so that every API process on it
    refuses the token's second use; the client is made once per app."""
    client = getattr(request.app.state, "console_used_tokens", None)
    if client is None:
        from adapters.messaging.redis_clients import redis_client

        # Short timeouts: a Redis that does not answer refuses the action within seconds.
        client = redis_client(svc.settings, socket_timeout=2, socket_connect_timeout=2)
        request.app.state.console_used_tokens = client

    def first_use(key: str, ttl_seconds: int) -> bool:
        return bool(client.set(key, b"1", nx=True, ex=ttl_seconds))

    return first_use


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


class NotAForm(Exception):
    """A POST whose body is not form-encoded (``text/plain``, JSON…): never read as a form."""


FORM_MEDIA_TYPE = "application/x-www-form-urlencoded"
"""The one body a console action reads: what a browser posts for the confirmation page's
form (it has no file field, so never ``multipart/form-data``). A ``text/plain`` form another
site posts, which browsers send cross-site without asking, is refused before it is read."""


def _check_form_media_type(content_type: str | None) -> None:
    media_type = (content_type or "").partition(";")[0].strip().lower()
    if media_type != FORM_MEDIA_TYPE:
        shown = media_type or "none"
        raise NotAForm(f"an action is posted as a form ({FORM_MEDIA_TYPE}), not as {shown[:80]}")


def _form_fields(body: bytes) -> dict[str, list[str]]:
    try:
        return parse_qs(body.decode("utf-8", "replace"), max_num_fields=MAX_FORM_FIELDS)
    except ValueError:
        raise MalformedForm(f"the form has more than {MAX_FORM_FIELDS} fields") from None


MAX_FORM_FIELDS = 8


def _checked(kind: str, target: str, caller: Caller) -> ActionKind[Any, Any]:
    action = ACTION_KINDS.get(kind)
    if action is None or len(target) > 128 or not TARGET.match(target):
        raise NotFound(f"no action {kind!r} on {target!r}")
    caller.grant.check(action.scope)
    return action


def _refusal(error: BaseException, doing: str) -> HTMLResponse:
    """The page of an action (or a read) that could not be done, with the status the API
    answers for that error; never a traceback."""
    if isinstance(error, Forbidden):
        return message_page("Refused", f"{error} (nothing was changed)", status=403)
    if isinstance(error, NotAForm):
        return message_page("Not done", f"{doing}: {error} (nothing was changed)", status=415)
    if isinstance(error, UseUncheckable):
        logger.warning("console: %s refused: %s", doing, error.__cause__)
        return message_page("Unavailable", f"{doing}: {error} (nothing was changed)", status=503)
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


def _form(action: ActionKind[Any, Any], kind: str, target: str, token: str) -> str:
    reason = (
        f"<p><label>{text(REASON_LABELS[action.reason])} "
        '<input type="text" name="reason" maxlength="200" size="60" required></label></p>'
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
        action = _checked(kind, target, caller)
        read = SUBJECTS[action.target.subject]
        subject = await to_thread.run_sync(lambda: read(svc, target))
        token = await to_thread.run_sync(
            lambda: _tokens(request, svc).issue(caller.client_id, kind, target)
        )
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
        action = _checked(kind, target, caller)
        read = SUBJECTS[action.target.subject]
        check_origin(request.headers, request.headers.get("host"))
        _check_form_media_type(request.headers.get("content-type"))
        form = _form_fields(await request.body())
        token = next(iter(form.get(FIELD, [])), None)
        tokens = await to_thread.run_sync(lambda: _tokens(request, svc))
        # A forged or another client's token is refused first; the reason is checked before
        # the token is spent, so that a form sent without a reason can be sent again.
        tokens.check(caller.client_id, kind, target, token)
        reason = require_reason(action, (form.get("reason") or [""])[0])
        first_use = _first_use(request, svc)
        # Spent before the action is taken, so that two posts of one form racing each other
        # take it once; an action that then fails needs its page opened again.
        await to_thread.run_sync(
            lambda: tokens.redeem(caller.client_id, kind, target, token, first_use)
        )
        subject = await to_thread.run_sync(lambda: read(svc, target))
        done = await to_thread.run_sync(
            lambda: take(
                action, svc, [target], reason, by=caller.client_id, surface=Surface.CONSOLE
            )
        )
        said = action.said(done)
    except Exception as error:
        return _refusal(error, f"{kind} {target}")
    logger.info("console: %s took %s on %s", caller.client_id, kind, target)
    body = (
        f'<p class="message done">{text(said)}.</p>'
        f'<p class="pager">{link(subject.back, "Back to " + subject.back_label)} · '
        f"{link(FAILURES, 'Back to the failures')}</p>"
    )
    return page("Done", body, nav="failures")
