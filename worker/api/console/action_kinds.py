"""The console's actions, each as its confirmation page shows it and as it is taken: what it
acts on (its subject, read now) and the use case it runs, the one the CLI runs
(``application/handlers/operations/actions.py``, ``adapters/messaging/dead_letter_replay.py``,
``application/handlers/drift/report.py``). The pages and the form around them are ``actions.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from application.handlers.drift.report import adopt_findings, drift_report
from application.handlers.operations import actions as handlers
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
from domain.errors import NotFound
from domain.operations.outcomes import error_line
from worker.api.auth import Caller
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
    from adapters.messaging.dead_letters import DeadLetters
    from adapters.messaging.redis_clients import redis_client

    return DeadLetters(redis_client(svc.settings), shiftable_clock=svc.settings.shiftable_clock)


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
    from adapters.messaging.dead_letter_replay import replay_dead_letter, worker_task_names
    from adapters.messaging.redis_clients import redis_client

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
