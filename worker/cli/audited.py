"""The options and the taking of an operator action on the command line, for the commands
that are written in their own group's module (``clients rotate-secret``, ``webhooks add``…,
``clock advance``): their own arguments and output (a secret printed once), the table's
wording, reason, ``--operator`` and ``take`` (``application/operator_actions.py``), as the
commands ``worker/cli/actions.py`` makes from the table have."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from application.operator_actions import REASON_LABELS, Surface, action
from worker.cli.base import operator_option

if TYPE_CHECKING:
    from worker.bootstrap import Services

F = TypeVar("F", bound=Callable[..., Any])


def reason_help(kind: str) -> str:
    """What ``--reason`` says for the action ``kind``."""
    taken = action(kind)
    return f"{REASON_LABELS[taken.reason]}; {'required' if taken.reason_required else 'optional'}."


def command_help(kind: str, note: str = "") -> str:
    """A command's help: the table's summary and what the action does, then ``note``."""
    taken = action(kind)
    return f"{taken.summary}. {taken.does} {note}".strip()


def audited_options(kind: str) -> Callable[[F], F]:
    """``--reason`` (as the table asks for it) and ``--operator``, for the action ``kind``."""

    def decorate(command: F) -> F:
        # Not a required option: a missing reason is the action's refusal, one line naming it.
        with_reason = click.option("--reason", default="", help=reason_help(kind))(command)
        decorated: F = operator_option(with_reason)
        return decorated

    return decorate


def take_action(
    kind: str,
    svc: Services,
    targets: Sequence[str],
    reason: str,
    operator: str,
    options: Mapping[str, Any] | None = None,
) -> Any:
    """Take the action ``kind`` from the command line, audited (the table's ``take``)."""
    from application.operator_actions import take

    return take(
        action(kind), svc, targets, reason, by=operator, surface=Surface.CLI, options=options
    )
