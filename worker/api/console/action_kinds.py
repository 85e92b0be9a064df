"""The console's side of the operator's actions (``application/operator_actions.py``): what
each acts on, as its confirmation page shows it, read now by the kind of its target. The
actions themselves (their wording, scope and use case) are the table's; the pages and the form
around them are ``actions.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from application.handlers.drift.report import drift_finding
from application.requests.operator_requests import FindDrift
from domain.errors import NotFound
from domain.operations.outcomes import error_line
from worker.api.console.layout import PREFIX, badge, text, url, when
from worker.bootstrap import Services

FAILURES = f"{PREFIX}/failures"


@dataclass(frozen=True)
class Subject:
    """What an action acts on, as its confirmation page shows it."""

    facts: list[tuple[str, str]]
    back: str
    """The page of the thing acted on."""
    back_label: str


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


def _drift_subject(svc: Services, key: str) -> Subject:
    finding = drift_finding(FindDrift(key), svc)
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
    from adapters.messaging.dead_letters import DeadLetters
    from adapters.messaging.redis_clients import redis_client

    return DeadLetters(redis_client(svc.settings), shiftable_clock=svc.settings.shiftable_clock)


SUBJECTS: dict[str, Callable[[Services, str], Subject]] = {
    "command": _command_subject,
    "billing_account": _account_subject,
    "scheduled_change": _change_subject,
    "dead_letter": _letter_subject,
    "drift_finding": _drift_subject,
}
"""How the confirmation page reads what an action acts on, by its target's subject."""
