"""What an operator may do from the console (``billing-worker accounts retry`` …, and
``POST /v1beta1/operations/…``), as messages.

Each action is run at once by its handler (``application/handlers/operations/actions.py``), in a
unit of work that writes its event to the outbox; what it sets going (a registration, a command
sent again) runs on the queue as any command does. ``command_id`` names the action: its events
carry it, and the registration a retry sends runs under it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field, StringConstraints, model_validator

from domain.messages import CommandId, Message, ResourceId
from domain.operations.console import SubscriptionStory

OPERATOR_ACTION_PREFIX = "op"


def new_action_id(action: str) -> str:
    """A fresh action id such as ``op-retry-registration-0b6e…`` (a valid command id)."""
    return f"{OPERATOR_ACTION_PREFIX}-{action}-{uuid.uuid4().hex[:16]}"


Reason = Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)]


class OperatorAction(Message):
    command_id: CommandId
    reason: Reason = Field(default="", description="Why (kept with what it changed).")

    @model_validator(mode="before")
    @classmethod
    def _one_line(cls, data: Any) -> Any:
        # Operators read reasons in a terminal's table: one line of printable text.
        if isinstance(data, dict) and isinstance(data.get("reason"), str):
            text = "".join(c if c.isprintable() else " " for c in data["reason"])
            return {**data, "reason": " ".join(text.split())}
        return data


class RetryRegistration(OperatorAction):
    """Send a ``pending`` account's registration again now (same idempotency key)."""

    billing_account_id: ResourceId


class MarkAccountOffline(OperatorAction):
    """Make a ``pending`` account ``active`` without the provider."""

    billing_account_id: ResourceId


class RetryCommand(OperatorAction):
    """Send a command waiting for its retry (or its turn) again now, under its own id."""

    target_command_id: CommandId


class ReplayCommands(OperatorAction):
    """Run finished commands again, under their own ids (all or none)."""

    target_command_ids: Annotated[list[CommandId], Field(min_length=1, max_length=100)]


class SkipScheduledChange(OperatorAction):
    """Skip a ``scheduled`` plan change: it will not be made."""

    change_id: ResourceId


class ReplayDeadLetter(OperatorAction):
    """Put a dead letter's message back on its queue, if a worker can take it now."""

    letter_id: str


class AdoptDrift(OperatorAction):
    """Adopt one finding of the drift report read now, named by its key (``kind:id…``)."""

    finding_key: str


class RotateClientSecret(OperatorAction):
    """Give an API client a new secret (shown once); the old one stops working."""

    client_id: ResourceId


class MoveClock(OperatorAction):
    """Move the local stack's clock (the Stripe emulator's and the application's) ahead by
    ``seconds``, or, without, back to real time."""

    seconds: float | None = Field(default=None, gt=0)
    duration: str = Field(default="", description="The move as the operator said it: ``31d``.")


@dataclass(frozen=True)
class RotatedClientSecret:
    """An API client's new secret: the only time it is shown (never in the audit trail)."""

    client_id: str
    secret: str = field(repr=False)


class ClockMoved(Message):
    """How far ahead of real time the clock was, and is, in seconds."""

    duration: str = Field(description="The move as the operator said it; empty for a reset.")
    was: float
    offset: float


class ActionTaken(Message):
    """What an action did."""

    action: str
    command_id: str = Field(description="The action's id (its events carry it).")
    subject: str = Field(description="What it acted on, type:id.")
    state: str = Field(description="The subject's state now.")
    changed: bool = Field(description="False when there was nothing to do.")
    sent_command_id: str | None = Field(
        default=None, description="The command it put on the queue, if any."
    )


@dataclass(frozen=True)
class ShowSubscription:
    """Complete a subscription's story, as the console read it, with its invoices at the
    provider (a read: nothing changes, no event)."""

    story: SubscriptionStory
