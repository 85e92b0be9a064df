"""The operator's actions, written once: each one's kind, what it acts on, the request it
builds, the handler it runs, the scope an API client needs, what it does with a reason, and what
it says (its title, what taking it does, the line that tells what it did).

Three surfaces offer them from this table, each with its own details keyed by the kind: the
operations API (``worker/api/routes/operator_actions.py``: its paths), the console
(``worker/api/console/actions.py``: its confirmation pages, CSRF tokens and subjects) and the
command line (``worker/cli/actions.py``: its commands and arguments). Every action is taken
through :func:`take`, the one place each passes through: its reason is checked, its log line
and its audit entry (``application/audit.py``) written there.
``tests/unit/test_operator_actions.py`` checks each surface offers what the table says it does.

Nothing here imports a handler at import time: the command line shows its help from this
table without loading the use cases.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

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
from domain.errors import InvalidArgument
from domain.permissions import Scope

if TYPE_CHECKING:
    from domain.ports.application import OperatorContext

logger = logging.getLogger(__name__)

MAX_REASON_LENGTH = 200

Req = TypeVar("Req")
Out = TypeVar("Out")


class Surface(StrEnum):
    """Where an operator takes an action."""

    API = "api"
    """``POST /v1beta1/operations/…``, with a JSON body."""
    CONSOLE = "console"
    """The console's confirmation page, then its form."""
    CLI = "cli"
    """A ``billing-worker`` command."""


EVERY_SURFACE = frozenset(Surface)


class ReasonUse(StrEnum):
    """What an action does with the operator's reason. Every action changes state, so every
    one needs a reason (:func:`require_reason`)."""

    AUDITED = "audited"
    """Kept in the audit trail (``domain.operations.audit``) and the action's log line."""
    KEPT = "kept"
    """Also kept by the handler, with what it changed (a skipped change's reason)."""


REASON_LABELS = {
    ReasonUse.AUDITED: "Why (kept in the audit trail)",
    ReasonUse.KEPT: "Why (kept with what it changes)",
}
"""How each surface asks for a reason (the console's field, the command line's ``--reason``)."""


@dataclass(frozen=True)
class Target:
    """What an action acts on and how it is named (the console reads it for its confirmation
    page by ``subject``)."""

    subject: str
    """``command``, ``billing_account``, ``scheduled_change``, ``dead_letter`` or
    ``drift_finding``."""
    name: str
    """What the target's identifier is called (an argument's name)."""


@dataclass(frozen=True)
class Call:
    """One action asked for: its id (its events carry it), its targets and the reason."""

    action_id: str
    targets: tuple[str, ...]
    reason: str = ""

    @property
    def target(self) -> str:
        """The one target of an action that takes one."""
        (target,) = self.targets
        return target


@dataclass(frozen=True)
class ActionKind(Generic[Req, Out]):
    """One action, as every surface offers it."""

    kind: str
    """Its stable name, in the console's addresses and its CSRF tokens (``replay-command``)."""
    target: Target
    request: Callable[[Call], Req]
    """Builds the handler's request from what the operator asked."""
    handler: str
    """The handler it runs, ``module:function`` under ``application/handlers/`` (loaded when
    the action is taken), called ``handler(request, ctx)``."""
    scope: Scope
    """What an API client needs to take it (the console's operators included)."""
    reason: ReasonUse
    title: str
    """Its name as a button and a confirmation page's title: ``Replay the command``."""
    summary: str
    """One line: what it is for (the API's summary, the command line's short help)."""
    does: str
    """What taking it does, as the confirmation page, the API's description and the command
    line's help say it."""
    said: Callable[[Out], str]
    """The line telling what it did."""
    view: Callable[[Out], Any]
    """What it did, as JSON."""
    surfaces: frozenset[Surface] = EVERY_SURFACE
    many: bool = False
    """Whether it takes several targets at once, all or none (the command line's)."""

    def run(self, request: Req, ctx: OperatorContext) -> Out:
        module, _, name = self.handler.partition(":")
        handler: Callable[[Req, OperatorContext], Out] = getattr(
            importlib.import_module(f"application.handlers.{module}"), name
        )
        return handler(request, ctx)


def require_reason(action: ActionKind[Any, Any], reason: str) -> str:
    """The reason, one line of printable text; an ``InvalidArgument`` naming the ``reason``
    field when none was given (every action changes state: each needs one)."""
    said = " ".join("".join(c if c.isprintable() else " " for c in reason).split())
    if not said:
        raise InvalidArgument.for_fields(
            f"{action.kind} needs a reason: say why (it is kept in the audit trail)",
            [("reason", "required: why the action is taken")],
        )
    if len(said) > MAX_REASON_LENGTH:
        raise InvalidArgument.for_fields(
            f"the reason is too long (at most {MAX_REASON_LENGTH} characters)",
            [("reason", f"at most {MAX_REASON_LENGTH} characters")],
        )
    return said


def take(
    action: ActionKind[Any, Out],
    ctx: OperatorContext,
    targets: Sequence[str],
    reason: str = "",
    *,
    by: str,
    surface: Surface,
) -> Out:
    """Take ``action`` on ``targets`` for ``by`` (an API client's id, or the command line's
    operator name) from ``surface``: check its reason, build its request, run its handler and
    write its audit entry. Every surface takes every action here.

    The entry (``domain.operations.audit``) and its ``operator.action_taken`` event are
    written in the first transaction the handler commits, beside what it changed
    (``application.audit``); an action that changes nothing in a unit of work (a replay
    through the command log, a dead letter put back) has them written once it is done. A
    refused action writes none."""
    # Imported here: the audit's ports load the domain's validators, which the command line's
    # help must not wait for.
    from application.audit import AuditedContext, PendingEntry

    reason = require_reason(action, reason)
    call = Call(new_action_id(action.kind), tuple(targets), reason)
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

OPERATOR_ACTIONS: tuple[ActionKind[Any, Any], ...] = (
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


ACTIONS_BY_KIND: dict[str, ActionKind[Any, Any]] = {a.kind: a for a in OPERATOR_ACTIONS}


def action(kind: str) -> ActionKind[Any, Any]:
    """The action of kind (a KeyError for none)."""
    return ACTIONS_BY_KIND[kind]


def offered_by(surface: Surface) -> tuple[ActionKind[Any, Any], ...]:
    """The actions surface offers, in the table's order."""
    return tuple(a for a in OPERATOR_ACTIONS if surface in a.surfaces)
