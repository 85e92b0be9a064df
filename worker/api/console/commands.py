"""A command's page, ``/console/commands/{id}``: its record (what it asked, with personal data
masked; what it answered or why it failed), its attempts and the backoff between them, the
Stripe calls made for it, the events it emitted, and what operators did about it.

Read by :meth:`domain.operations.console.ConsoleQueries.command_story`: the command by its
id, its calls by ``command_id`` and its events among its subjects', each through an index.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from domain.operations.console import CommandStory, duration
from domain.redaction import redact
from worker.api.auth import Caller
from worker.api.console.access import Viewer, may_see
from worker.api.console.actions import action_button, may_act
from worker.api.console.layout import (
    PREFIX,
    badge,
    facts,
    link,
    message_page,
    page,
    section,
    table,
    text,
    url,
    when,
)
from worker.api.state import State

router = APIRouter()


def _document(value: dict[str, Any] | None, empty: str) -> str:
    """A JSON document as the page shows it: masked by the redaction rules, indented."""
    if not value:
        return f'<p class="empty">{text(empty)}</p>'
    shown = json.dumps(redact(value), indent=2, sort_keys=True, default=str)
    return f'<pre class="document">{text(shown)}</pre>'


def owner(payload: dict[str, Any]) -> str | None:
    """The organization a command acts in, if its payload names one."""
    value = payload.get("org_id")
    return value if isinstance(value, str) and value else None


def _acts_on(story: CommandStory) -> str:
    payload = story.payload
    links = []
    if payload.get("billing_account_id"):
        account_id = str(payload["billing_account_id"])
        links.append(f"account {link(url('accounts', account_id), account_id)}")
    if payload.get("org_id"):
        org_id = str(payload["org_id"])
        links.append(f"organization {link(url('organizations', org_id), org_id)}")
    if payload.get("subscription_id"):
        subscription_id = str(payload["subscription_id"])
        links.append(f"subscription {link(url('subscriptions', subscription_id), subscription_id)}")
    return ", ".join(links) or "nothing it names by id"


def _summary(story: CommandStory) -> str:
    command = story.command
    pairs = [
        ("Type", text(command.type)),
        ("Status", badge(command.status)),
        ("Acts on", _acts_on(story)),
        ("Sent by", f"{text(command.source)} {text(story.client_id or '')}".strip()),
        ("Idempotency key", f"<code>{text(story.idempotency_key or 'none')}</code>"),
        ("Created", when(command.created_at)),
        ("Published", when(story.published_at) or "not yet"),
        ("Updated", when(command.updated_at)),
        ("Finished", when(command.finished_at) or "not yet"),
    ]
    if command.next_retry_at is not None:
        pairs.append(("Next retry", when(command.next_retry_at)))
    if command.last_error:
        pairs.append(("Last error", text(command.last_error)))
    return facts(pairs)


def _attempts(story: CommandStory) -> str:
    command = story.command
    told = (
        f"<p>{text(command.attempts)} attempt(s) run, replays included; "
        f"{text(command.retries)} transient failure(s) retried after a backoff.</p>"
    )
    rows = [
        [
            text(retry.attempt),
            when(retry.at),
            text(retry.reason),
            text(duration(retry.delay_seconds)),
        ]
        for retry in story.retry_history
    ]
    headers = ("Attempt", "Failed at", "Why", "Retried after")
    return told + table(headers, rows, "no attempt failed transiently")


def _calls(story: CommandStory) -> str:
    rows = [
        [
            when(call.at),
            text(call.operation),
            text(call.attempt),
            badge(call.outcome),
            f"<code>{text(call.idempotency_key or '')}</code>",
            text(call.error),
            text(f"{call.duration_ms} ms"),
        ]
        for call in story.provider_calls
    ]
    headers = ("When", "Operation", "Attempt", "Outcome", "Idempotency key", "Error", "Took")
    return table(headers, rows, "no Stripe call was made for it")


def _events(story: CommandStory) -> str:
    rows = [
        [
            when(event.occurred_at),
            text(event.type),
            f"<code>{text(event.id)}</code>",
            text(event.subject),
            when(event.published_at) or "not yet published",
        ]
        for event in story.events
    ]
    return table(("When", "Type", "Event", "Subject", "Published"), rows, "it emitted no event")


def audit_section(story: CommandStory) -> str:
    """What operators did about the command (replays, retries): who, where, why and what it
    changed, from the audit trail."""
    rows = [
        [
            when(entry.at),
            text(entry.action),
            f"<strong>{text(entry.operator)}</strong> ({text(entry.surface)})",
            text(entry.reason),
            text("; ".join(entry.changes)),
        ]
        for entry in story.audit
    ]
    headers = ("When", "Action", "Who", "Why", "What it changed")
    return section(
        "Operators' actions", table(headers, rows, "no operator acted on it"), id="audit"
    )


def _actions(caller: Caller, story: CommandStory) -> str:
    command = story.command
    if not may_act(caller):
        return ""
    if command.status == "failed":
        button = action_button(caller, "replay-command", command.id, "Replay")
    elif command.status in ("retrying", "waiting"):
        button = action_button(caller, "retry-command", command.id, "Retry now")
    else:
        return ""
    return section("Actions", f'<p class="actions">{button}</p>', id="actions") if button else ""


def command_body(caller: Caller, story: CommandStory) -> str:
    return (
        _summary(story)
        + section("What it asked", _document(story.payload, "an empty payload"), id="payload")
        + section(
            "What it answered",
            _document(story.result or story.error, "nothing yet"),
            id="outcome",
        )
        + section("Attempts", _attempts(story), id="attempts")
        + section("Stripe calls", _calls(story), id="stripe-calls")
        + section("Events", _events(story), id="events")
        + audit_section(story)
        + _actions(caller, story)
    )


@router.get(PREFIX + "/commands/{command_id}")
def command_page(command_id: str, caller: Viewer, state: State) -> HTMLResponse:
    story = state.svc.console().command_story(command_id)
    org_id = owner(story.payload) if story else None
    if story is None or (org_id is not None and not may_see(caller, org_id)):
        return message_page("Not found", f"No command {command_id}.", status=404)
    return page(f"Command {story.command.id}", command_body(caller, story), nav="")
