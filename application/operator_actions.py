"""The operator's actions, written once: each one's kind, what it acts on, the request it
builds, the handler it runs, the scope an API client needs, what it does with a reason, and what
it says (its title, what taking it does, the line that tells what it did).

Three surfaces offer them from this table, each with its own details keyed by the kind: the
operations API (``worker/api/routes/operator_actions.py``: its paths), the console
(``worker/api/console/actions.py``: its confirmation pages, CSRF tokens and subjects) and the
command line (``worker/cli/actions.py``: its commands and arguments). The actions on
configuration (:data:`CONFIGURATION_ACTIONS`: an API client's secret, the webhook endpoints,
the local stack's clock) are offered by commands and routes of their own, which print a new
secret once (``worker/cli/clients.py``, ``webhooks.py``, ``clock.py``,
``worker/api/routes/webhooks.py``). Every action is taken through :func:`take`, the one place
each passes through: its reason is checked, its log line and its audit entry
(``application/audit.py``) written there; no entry, event or log line holds a secret.
``tests/unit/test_operator_actions.py`` checks each surface offers what the table says it does.

Nothing here imports a handler at import time: the command line shows its help from this
table without loading the use cases.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from application.action_kinds import (
    EVERY_SURFACE,
    MAX_REASON_LENGTH,
    REASON_LABELS,
    ActionKind,
    Call,
    ReasonUse,
    Surface,
    Target,
    require_reason,
)
from application.configuration_actions import CONFIGURATION_ACTIONS, LOCAL_CLOCK
from application.requests.operator_actions import (
    ActionTaken,
    AdoptDrift,
    MarkAccountOffline,
    ReplayCommands,
    ReplayDeadLetter,
    RetryCommand,
    RetryRegistration,
    SkipScheduledChange,
    new_action_id,
)
from domain.permissions import Scope

if TYPE_CHECKING:
    from domain.ports.application import OperatorContext

__all__ = [
    "ACTIONS_BY_KIND",
    "CONFIGURATION_ACTIONS",
    "EVERY_SURFACE",
    "LOCAL_CLOCK",
    "MAX_REASON_LENGTH",
    "OPERATOR_ACTIONS",
    "REASON_LABELS",
    "ActionKind",
    "Call",
    "ReasonUse",
    "Surface",
    "Target",
    "action",
    "offered_by",
    "require_reason",
    "take",
]

logger = logging.getLogger(__name__)

Out = TypeVar("Out")


def take(
    action: ActionKind[Any, Out],
    ctx: OperatorContext,
    targets: Sequence[str],
    reason: str = "",
    *,
    by: str,
    surface: Surface,
    options: Mapping[str, Any] | None = None,
) -> Out:
    """Take ``action`` on ``targets`` for ``by`` (an API client's id, or the command line's
    operator name) from ``surface``: check its reason, build its request, run its handler and
    write its audit entry. Every surface takes every action here.

    The entry (``domain.operations.audit``) and its ``operator.action_taken`` event are
    written in the first transaction the handler commits, beside what it changed
    (``application.audit``); an action that changes nothing in a unit of work (a replay
    through the command log, a dead letter put back) or is :attr:`ActionKind.audited_after`
    has them written once it is done, with the lines its ``said`` tells. A refused action
    writes none. ``options``: what else its request takes (:class:`Call`)."""
    # Imported here: the audit's ports load the domain's validators, which the command line's
    # help must not wait for.
    from application.audit import AuditedContext, PendingEntry

    reason = require_reason(action, reason)
    call = Call(new_action_id(action.kind), tuple(targets), reason, dict(options or {}))
    request = action.request(call)
    logger.info(
        "operator action %s %s on %s by %s (%s)%s",
        action.kind,
        call.action_id,
        " ".join(call.targets),
        by,
        surface.value,
        f": {reason}" if reason else "",
    )
    pending = PendingEntry(
        id=call.action_id,
        action=action.kind,
        operator=by,
        surface=surface.value,
        at=ctx.clock.now(),
        reason=reason,
        targets=tuple(f"{action.target.subject}:{target}" for target in call.targets),
        billing_account_id=_account_of(action, call, ctx),
    )
    if action.audited_after:
        done = action.run(request, ctx)
        if action.subjects is not None:
            pending = replace(pending, targets=tuple(action.subjects(done)))
    else:
        done = action.run(request, AuditedContext(ctx, pending))
    if pending.written is None:
        with ctx.unit_of_work() as uow:
            pending.write(uow, action.said(done).splitlines())
            uow.commit()
    return done


def _account_of(action: ActionKind[Any, Any], call: Call, ctx: OperatorContext) -> str | None:
    """The billing account an action's entry belongs to, when its target names one: the
    account itself, or the command's (from its payload: its account, else its organization's
    current one). Others are learnt from the events the action writes."""
    if action.target is ACCOUNT:
        return call.targets[0]
    if action.target is not COMMAND:
        return None
    payloads = [record.payload for record in map(ctx.commands.get, call.targets) if record]
    for payload in payloads:
        if isinstance(payload.get("billing_account_id"), str):
            return str(payload["billing_account_id"])
    for payload in payloads:
        if isinstance(payload.get("org_id"), str):
            with ctx.unit_of_work() as uow:
                account = uow.billing_accounts.current_for_organization(str(payload["org_id"]))
            if account is not None:
                return account.id
    return None


def _taken(taken: ActionTaken) -> Any:
    return taken.model_dump(mode="json")


def _replayed(taken: list[ActionTaken]) -> str:
    return "\n".join(
        f"command {one.sent_command_id} is {one.state} again: a worker runs it under its own id"
        for one in taken
    )


def _adopted(adoption: Any) -> str:
    finding = adoption.finding
    return f"{finding.kind.value} {' '.join(finding.ids)}: {adoption.outcome}"


def _adoption_view(adoption: Any) -> Any:
    return {**adoption.finding.to_view(), "outcome": adoption.outcome}


COMMAND = Target("command", "command_id")
ACCOUNT = Target("billing_account", "billing_account_id")

BILLING_ACTIONS: tuple[ActionKind[Any, Any], ...] = (
    ActionKind[ReplayCommands, list[ActionTaken]](
        kind="replay-command",
        target=COMMAND,
        request=lambda call: ReplayCommands(
            command_id=call.action_id, target_command_ids=list(call.targets), reason=call.reason
        ),
        handler="operations.actions:replay_commands",
        scope=Scope.OPERATIONS_WRITE,
        reason=ReasonUse.AUDITED,
        title="Replay the command",
        summary="Run a finished command again",
        does="The command is made queued again and published under its own id; a worker runs "
        "it as it ran before. What it did already is not done twice: its Stripe calls reuse "
        "their idempotency keys. A rejected command is refused, with its reason: it was the "
        "caller's mistake and would be rejected again.",
        said=_replayed,
        view=lambda taken: [_taken(one) for one in taken],
        surfaces=frozenset({Surface.CONSOLE, Surface.CLI}),
        many=True,
    ),
    ActionKind[RetryCommand, ActionTaken](
        kind="retry-command",
        target=COMMAND,
        request=lambda call: RetryCommand(
            command_id=call.action_id, target_command_id=call.target, reason=call.reason
        ),
        handler="operations.actions:retry_command",
        scope=Scope.OPERATIONS_WRITE,
        reason=ReasonUse.AUDITED,
        title="Retry the command now",
        summary="Run a waiting command now",
        does="Only a queued, retrying or waiting command: it is sent again now under its "
        "own id instead of at its next retry, and runs once (the delivery already waiting "
        "finds it done). A failed command is replayed instead.",
        said=lambda taken: f"command {taken.sent_command_id} sent again now ({taken.state})",
        view=_taken,
    ),
    ActionKind[RetryRegistration, ActionTaken](
        kind="retry-registration",
        target=ACCOUNT,
        request=lambda call: RetryRegistration(
            command_id=call.action_id, billing_account_id=call.target, reason=call.reason
        ),
        handler="operations.actions:retry_registration",
        scope=Scope.OPERATIONS_WRITE,
        reason=ReasonUse.AUDITED,
        title="Retry the registration",
        summary="Send a pending account's registration again now",
        does="Only a pending account: its registration with Stripe is sent again now, under "
        "its stored idempotency key (one customer however often it runs), and runs on the "
        "queue under the action's id.",
        said=lambda taken: (
            f"the registration of {_id(taken.subject)} was sent as {taken.sent_command_id}"
        ),
        view=_taken,
    ),
    ActionKind[MarkAccountOffline, ActionTaken](
        kind="mark-offline",
        target=ACCOUNT,
        request=lambda call: MarkAccountOffline(
            command_id=call.action_id, billing_account_id=call.target, reason=call.reason
        ),
        handler="operations.actions:mark_account_offline",
        scope=Scope.OPERATIONS_WRITE,
        reason=ReasonUse.AUDITED,
        title="Mark the account offline",
        summary="Make a pending account active without Stripe",
        does="The pending account becomes active without Stripe (its registration is "
        "abandoned; it can be registered later); an offline account is left as it is. A "
        "registration still retrying registers it all the same: mark it offline once its "
        "command has failed.",
        said=lambda taken: (
            f"{_id(taken.subject)} " + ("marked offline" if taken.changed else "already offline")
        ),
        view=_taken,
    ),
    ActionKind[SkipScheduledChange, ActionTaken](
        kind="skip-change",
        target=Target("scheduled_change", "change_id"),
        request=lambda call: SkipScheduledChange(
            command_id=call.action_id, change_id=call.target, reason=call.reason
        ),
        handler="operations.actions:skip_scheduled_change",
        scope=Scope.OPERATIONS_WRITE,
        reason=ReasonUse.KEPT,
        title="Skip the plan change",
        summary="Skip a scheduled plan change",
        does="Only a scheduled change: it is skipped and will not be made. A staged change "
        "(made at Stripe already) or one being applied is refused; a skipped one is left as "
        "it is.",
        said=lambda taken: (
            f"change {_id(taken.subject)} "
            + ("skipped" if taken.changed else "was skipped already")
        ),
        view=_taken,
    ),
    ActionKind[ReplayDeadLetter, ActionTaken](
        kind="replay-dead-letter",
        target=Target("dead_letter", "letter_id"),
        request=lambda call: ReplayDeadLetter(
            command_id=call.action_id, letter_id=call.target, reason=call.reason
        ),
        handler="operations.actions:replay_dead_letter",
        scope=Scope.OPERATIONS_WRITE,
        reason=ReasonUse.AUDITED,
        title="Replay the dead letter",
        summary="Put a dead letter's message back on its queue",
        does="The message is put back on its queue, if a worker can take it now (say, its "
        "task was unknown to the workers of the day), and the letter is dropped. One that "
        "still cannot be taken is refused and kept.",
        said=lambda taken: f"dead letter {_id(taken.subject)} put back {taken.state}",
        view=_taken,
        surfaces=frozenset({Surface.CONSOLE, Surface.CLI}),
    ),
    ActionKind[AdoptDrift, Any](
        kind="adopt-drift",
        target=Target("drift_finding", "finding"),
        request=lambda call: AdoptDrift(
            command_id=call.action_id, finding_key=call.target, reason=call.reason
        ),
        handler="drift.report:adopt_drift",
        scope=Scope.OPERATIONS_WRITE,
        reason=ReasonUse.AUDITED,
        title="Adopt the drift",
        summary="Adopt one finding of the drift report",
        does="The difference is linked as the drift report says (stripe drift --adopt, for "
        "this finding only), in its own transaction, after checking again that nothing linked "
        "it meanwhile.",
        said=_adopted,
        view=_adoption_view,
        surfaces=frozenset({Surface.CONSOLE}),
    ),
)


def _id(subject: str) -> str:
    """The id of an :class:ActionTaken's subject, type:id."""
    return subject.partition(":")[2]


OPERATOR_ACTIONS = (*BILLING_ACTIONS, *CONFIGURATION_ACTIONS)

ACTIONS_BY_KIND: dict[str, ActionKind[Any, Any]] = {a.kind: a for a in OPERATOR_ACTIONS}


def action(kind: str) -> ActionKind[Any, Any]:
    """The action of kind (a KeyError for none)."""
    return ACTIONS_BY_KIND[kind]


def offered_by(surface: Surface) -> tuple[ActionKind[Any, Any], ...]:
    """The actions surface offers, in the table's order."""
    return tuple(a for a in OPERATOR_ACTIONS if surface in a.surfaces)
