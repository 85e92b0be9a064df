"""What an operator action is, as the table of actions (``application/operator_actions.py``)
and every surface that offers one know it: where it is taken (:class:`Surface`), what it acts
on (:class:`Target`), one asking for it (:class:`Call`), the action itself
(:class:`ActionKind`) and the reason it needs (:func:`require_reason`).

Nothing here imports a handler at import time: the command line shows its help from the
table without loading the use cases.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from domain.errors import InvalidArgument
from domain.permissions import Scope

if TYPE_CHECKING:
    from domain.ports.application import OperatorContext

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
