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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from application.requests.operator_actions import (
    ActionTaken,
    AdoptDrift,
    ClockMoved,
    MarkAccountOffline,
    MoveClock,
    ReplayCommands,
    ReplayDeadLetter,
    RetryCommand,
    RetryRegistration,
    RotateClientSecret,
    RotatedClientSecret,
    SkipScheduledChange,
    new_action_id,
)
from domain.errors import InvalidArgument
from domain.permissions import Scope

if TYPE_CHECKING:
    from application.handlers.events.webhook_endpoints import (
        DisabledEndpoint,
        NewEndpoint,
        RotatedSecret,
    )
    from application.requests.operator_requests import (
        AddEndpoint,
        DisableEndpoint,
        EnableEndpoint,
        RotateSecret,
    )
    from domain.ports.application import OperatorContext
    from domain.webhooks import WebhookEndpoint

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
    """What an action does with the operator's reason. Every action changes state: most need
    a reason (:func:`require_reason`); those whose target keeps its own record of the change
    (a webhook endpoint's configuration) take one when given
    (:attr:`ActionKind.reason_required`)."""

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
    """``command``, ``billing_account``, ``scheduled_change``, ``dead_letter``,
    ``drift_finding``, ``api_client``, ``webhook_endpoint`` or ``clock``."""
    name: str
    """What the target's identifier is called (an argument's name)."""


@dataclass(frozen=True)
class Call:
    """One action asked for: its id (its events carry it), its targets and the reason, and
    what else its request takes (a webhook's events, a secret's grace, the clock's move)."""

    action_id: str
    targets: tuple[str, ...]
    reason: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)

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
    reason_required: bool = True
    """Whether it is refused without a reason (else an empty one is kept as it is)."""
    max_reason: int = MAX_REASON_LENGTH
    """The longest reason it takes (a disabled endpoint's keeps the 500 it always took)."""
    audited_after: bool = False
    """Whether its entry is written once it is done, in a transaction of its own, rather
    than in the first one it commits: an action whose change is not in the database's units
    of work (a client's secret, the clock), or whose change is told by its outcome rather than
    by the events it writes (a webhook endpoint's configuration writes none)."""
    subjects: Callable[[Out], Sequence[str]] | None = None
    """What the entry says it targeted, ``type:id`` each, from its outcome (an endpoint just
    added: its new id); else its targets. Only with :attr:`audited_after`."""

    def run(self, request: Req, ctx: OperatorContext) -> Out:
        module, _, name = self.handler.partition(":")
        handler: Callable[[Req, OperatorContext], Out] = getattr(
            importlib.import_module(f"application.handlers.{module}"), name
        )
        return handler(request, ctx)


def require_reason(action: ActionKind[Any, Any], reason: str) -> str:
    """The reason, one line of printable text; an ``InvalidArgument`` naming the ``reason``
    field when none was given to an action that needs one."""
    said = " ".join("".join(c if c.isprintable() else " " for c in reason).split())
    if not said and action.reason_required:
        raise InvalidArgument.for_fields(
            f"{action.kind} needs a reason: say why (it is kept in the audit trail)",
            [("reason", "required: why the action is taken")],
        )
    if len(said) > action.max_reason:
        raise InvalidArgument.for_fields(
            f"the reason is too long (at most {action.max_reason} characters)",
            [("reason", f"at most {action.max_reason} characters")],
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


def _add_endpoint(call: Call) -> AddEndpoint:
    from application.requests.operator_requests import AddEndpoint

    return AddEndpoint(
        call.target,
        tuple(call.options.get("events", ())),
        str(call.options.get("description", "")),
        allow_private_networks=bool(call.options.get("allow_private_networks", False)),
    )


def _disable_endpoint(call: Call) -> DisableEndpoint:
    from application.requests.operator_requests import DisableEndpoint

    return DisableEndpoint(call.target, call.reason)


def _enable_endpoint(call: Call) -> EnableEndpoint:
    from application.requests.operator_requests import EnableEndpoint

    return EnableEndpoint(call.target)


DEFAULT_SECRET_GRACE_SECONDS = 86_400.0
"""An endpoint's old secret's grace when a surface gives none (the setting's default)."""


def _rotate_endpoint_secret(call: Call) -> RotateSecret:
    from application.requests.operator_requests import RotateSecret

    grace = float(call.options.get("grace_seconds", DEFAULT_SECRET_GRACE_SECONDS))
    return RotateSecret(call.target, timedelta(seconds=grace))


def _endpoint_line(endpoint: WebhookEndpoint) -> str:
    return f"webhook endpoint {endpoint.id} ({endpoint.url})"


def _added(added: NewEndpoint) -> str:
    endpoint = added.endpoint
    events = ",".join(endpoint.event_types) or "every event"
    return f"{_endpoint_line(endpoint)} added, enabled, for {events}"


def _disabled(disabled: DisabledEndpoint) -> str:
    return (
        f"{_endpoint_line(disabled.endpoint)} disabled: {disabled.endpoint.disabled_reason}; "
        f"{disabled.abandoned} unfinished deliveries marked failed"
    )


def _rotated_endpoint(rotated: RotatedSecret) -> str:
    until = f"{rotated.previous_valid_until:%Y-%m-%d %H:%M:%S} UTC"
    return f"{_endpoint_line(rotated.endpoint)} has a new secret; the old one signs until {until}"


def _days(seconds: float) -> str:
    return f"{seconds / 86_400:.2f} days"


def _clock_moved(moved: ClockMoved) -> str:
    if not moved.duration:
        return f"the clock is back to real time (it was {_days(moved.was)} ahead)"
    return (
        f"advanced {moved.duration}; the clock is now {_days(moved.offset)} ahead "
        f"(it was {_days(moved.was)} ahead)"
    )


def _move_clock(call: Call) -> MoveClock:
    seconds = call.options.get("seconds")
    return MoveClock(
        command_id=call.action_id,
        seconds=None if seconds is None else float(seconds),
        duration=str(call.options.get("duration", "")),
        reason=call.reason,
    )


ENDPOINT = Target("webhook_endpoint", "endpoint_id")
DISABLED_ENDPOINT_MAX_REASON = 500
"""As ``application.handlers.events.webhook_endpoints.MAX_REASON`` (not imported: the table
loads no handler)."""
CLOCK = Target("clock", "clock")
LOCAL_CLOCK = "local"
"""The one clock's id (``clock:local``): the local stack's."""
ENDPOINT_SURFACES = frozenset({Surface.API, Surface.CLI})
CONFIGURATION_REASON = (
    "A reason is optional: the endpoint keeps its own record (its state, why it is disabled)."
)

CONFIGURATION_ACTIONS: tuple[ActionKind[Any, Any], ...] = (
    ActionKind[RotateClientSecret, RotatedClientSecret](
        kind="rotate-client-secret",
        target=Target("api_client", "client_id"),
        request=lambda call: RotateClientSecret(
            command_id=call.action_id, client_id=call.target, reason=call.reason
        ),
        handler="operations.admin:rotate_client_secret",
        scope=Scope.OPERATIONS_WRITE,
        reason=ReasonUse.AUDITED,
        title="Rotate the client's secret",
        summary="Give a client a new secret, printed once",
        does="The old one stops working (within BILLING_AUTH_CACHE_SECONDS in API processes "
        "that verified it recently). The audit trail keeps who rotated it and why, never the "
        "secret.",
        said=lambda rotated: (
            f"client {rotated.client_id} has a new secret; the old one no longer authenticates"
        ),
        view=lambda rotated: {"client_id": rotated.client_id},
        surfaces=frozenset({Surface.CLI}),
        audited_after=True,
    ),
    ActionKind["AddEndpoint", "NewEndpoint"](
        kind="add-webhook",
        target=Target("webhook_url", "url"),
        request=_add_endpoint,
        handler="events.webhook_endpoints:add_endpoint",
        scope=Scope.WEBHOOKS_MANAGE,
        reason=ReasonUse.AUDITED,
        title="Add a webhook endpoint",
        summary="Add a webhook endpoint",
        does="An enabled endpoint receives the events it names (every event by default), "
        "each signed with its secret, shown this once (never in the audit trail). "
        + CONFIGURATION_REASON,
        said=_added,
        view=lambda added: added.endpoint.to_view(),
        surfaces=ENDPOINT_SURFACES,
        reason_required=False,
        audited_after=True,
        subjects=lambda added: (f"{ENDPOINT.subject}:{added.endpoint.id}",),
    ),
    ActionKind["DisableEndpoint", "DisabledEndpoint"](
        kind="disable-webhook",
        target=ENDPOINT,
        request=_disable_endpoint,
        handler="events.webhook_endpoints:disable_endpoint",
        scope=Scope.WEBHOOKS_MANAGE,
        reason=ReasonUse.KEPT,
        title="Disable the webhook endpoint",
        summary="Stop sending to a webhook endpoint",
        does="Nothing more is sent to it; its unfinished deliveries are marked failed, to be "
        "replayed once it is enabled again. Disabling a disabled endpoint keeps its first "
        "reason. " + CONFIGURATION_REASON,
        said=_disabled,
        view=lambda disabled: {
            **disabled.endpoint.to_view(),
            "abandoned_deliveries": disabled.abandoned,
        },
        surfaces=ENDPOINT_SURFACES,
        reason_required=False,
        max_reason=DISABLED_ENDPOINT_MAX_REASON,
        audited_after=True,
    ),
    ActionKind["EnableEndpoint", "WebhookEndpoint"](
        kind="enable-webhook",
        target=ENDPOINT,
        request=_enable_endpoint,
        handler="events.webhook_endpoints:enable_endpoint",
        scope=Scope.WEBHOOKS_MANAGE,
        reason=ReasonUse.AUDITED,
        title="Enable the webhook endpoint",
        summary="Send to a webhook endpoint again",
        does="New events are sent to it again; its failed deliveries stay failed until "
        "replayed. " + CONFIGURATION_REASON,
        said=lambda endpoint: f"{_endpoint_line(endpoint)} enabled",
        view=lambda endpoint: endpoint.to_view(),
        surfaces=ENDPOINT_SURFACES,
        reason_required=False,
        audited_after=True,
    ),
    ActionKind["RotateSecret", "RotatedSecret"](
        kind="rotate-webhook-secret",
        target=ENDPOINT,
        request=_rotate_endpoint_secret,
        handler="events.webhook_endpoints:rotate_secret",
        scope=Scope.WEBHOOKS_MANAGE,
        reason=ReasonUse.AUDITED,
        title="Rotate the webhook endpoint's secret",
        summary="Give a webhook endpoint a new secret, printed once",
        does="The old one keeps signing beside it for BILLING_WEBHOOK_SECRET_GRACE_SECONDS, so "
        "that the receiver can switch. The audit trail keeps who rotated it and why, never the "
        "secret.",
        said=_rotated_endpoint,
        view=lambda rotated: {
            **rotated.endpoint.to_view(),
            "previous_secret_expires_at": rotated.previous_valid_until.isoformat(),
        },
        surfaces=ENDPOINT_SURFACES,
        audited_after=True,
    ),
    ActionKind[MoveClock, ClockMoved](
        kind="advance-clock",
        target=CLOCK,
        request=_move_clock,
        handler="operations.admin:move_clock",
        scope=Scope.OPERATIONS_WRITE,
        reason=ReasonUse.AUDITED,
        title="Move the clock ahead",
        summary="Move the application clock and the Stripe emulator's together",
        does="Every process of the local stack and the emulator run on the moved clock: "
        "periods end and changes fall due as they would after that long.",
        said=_clock_moved,
        view=lambda moved: moved.model_dump(mode="json"),
        surfaces=frozenset({Surface.CLI}),
        audited_after=True,
    ),
    ActionKind[MoveClock, ClockMoved](
        kind="reset-clock",
        target=CLOCK,
        request=_move_clock,
        handler="operations.admin:move_clock",
        scope=Scope.OPERATIONS_WRITE,
        reason=ReasonUse.AUDITED,
        title="Bring the clock back to real time",
        summary="Bring the application clock and the Stripe emulator's back to real time",
        does="Data made while the clock was ahead keeps its times (a period that ends in a "
        "month of shifted time ends then).",
        said=_clock_moved,
        view=lambda moved: moved.model_dump(mode="json"),
        surfaces=frozenset({Surface.CLI}),
        audited_after=True,
    ),
)
"""The actions on configuration rather than billing data: an API client's secret, the
webhook endpoints, the local stack's clock. Each surface offers them from its own commands
and routes (their secrets are printed there, and only there), through :func:`take`."""


def _id(subject: str) -> str:
    """The id of an :class:ActionTaken's subject, type:id."""
    return subject.partition(":")[2]


OPERATOR_ACTIONS = (*OPERATOR_ACTIONS, *CONFIGURATION_ACTIONS)

ACTIONS_BY_KIND: dict[str, ActionKind[Any, Any]] = {a.kind: a for a in OPERATOR_ACTIONS}


def action(kind: str) -> ActionKind[Any, Any]:
    """The action of kind (a KeyError for none)."""
    return ACTIONS_BY_KIND[kind]


def offered_by(surface: Surface) -> tuple[ActionKind[Any, Any], ...]:
    """The actions surface offers, in the table's order."""
    return tuple(a for a in OPERATOR_ACTIONS if surface in a.surfaces)
