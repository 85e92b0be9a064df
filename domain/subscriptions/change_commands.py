"""The commands that change a subscription's plan (spec section 4.3) and their results:
:class:`ChangeSubscriptionPlan` (the API's request), :class:`ApplyScheduledChange` (beat's, for
a change that fell due), :class:`FinishStagedWithdrawal` (beat's, for a staged change whose
withdrawal was given up)."""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pydantic import AwareDatetime, ConfigDict, Field, StrictBool, model_validator
from pydantic_core import PydanticCustomError

from domain.messages import Command, ResourceId, Result
from domain.provider.rate_budget import Priority
from domain.subscriptions.plans import PlanRef
from domain.subscriptions.subscription import Phase


class ChangeSubscriptionPlan(Command):
    """Change a subscription's plan now or at the end of its period, or cancel the upcoming
    change (``POST …/subscriptions/{id}/change``). Exactly one of ``plan`` and
    ``cancel_upcoming_changes`` is given; ``immediate`` goes with ``plan``."""

    TASK_NAME: ClassVar[str] = "subscriptions.change_plan"
    QUEUE: ClassVar[str] = "subscriptions"

    # ``_one_thing_to_do`` as JSON Schema, for the message's published schema: canceling
    # takes no plan (nor ``immediate``); anything else needs a plan.
    model_config = ConfigDict(
        json_schema_extra={
            "if": {
                "properties": {"cancel_upcoming_changes": {"const": True}},
                "required": ["cancel_upcoming_changes"],
            },
            "then": {"properties": {"plan": {"type": "null"}, "immediate": {"const": False}}},
            "else": {"required": ["plan"], "properties": {"plan": {"type": "string"}}},
        }
    )

    org_id: ResourceId
    billing_account_id: ResourceId
    subscription_id: ResourceId
    plan: PlanRef | None = None
    immediate: StrictBool = False
    cancel_upcoming_changes: StrictBool = False
    proration_date: AwareDatetime | None = Field(
        default=None,
        description="For an immediate change: prorate as of this time, which must be the "
        "`proration_date` a preview of this same change (subscription, current plan, target "
        "plan) answered at most 5 minutes ago (else the command is rejected, naming this "
        "field), so that the change invoices what the preview showed to the cent. Default: "
        "now.",
    )

    @model_validator(mode="after")
    def _one_thing_to_do(self) -> Self:
        if self.plan is not None and self.cancel_upcoming_changes:
            raise PydanticCustomError(
                "conflict", "a plan change and cancel_upcoming_changes cannot go together"
            )
        if self.plan is None and not self.cancel_upcoming_changes:
            raise PydanticCustomError(
                "nothing_requested", "give a plan to change to, or cancel_upcoming_changes: true"
            )
        if self.immediate and self.plan is None:
            raise PydanticCustomError("immediate_without_plan", "immediate needs a plan")
        if self.proration_date is not None and not self.immediate:
            raise PydanticCustomError(
                "proration_date_without_immediate",
                "proration_date goes with an immediate change only",
            )
        return self


class ApplyScheduledChange(Command):
    """Apply a due plan change at the provider, then locally. Published by beat's sweep
    (``command_id`` ``apply:{change_id}:{claim}``); applying an applied change does nothing."""

    TASK_NAME: ClassVar[str] = "subscriptions.apply_scheduled_change"
    QUEUE: ClassVar[str] = "subscriptions"
    PRIORITY: ClassVar[Priority] = Priority.BULK

    change_id: ResourceId


class FinishStagedWithdrawal(Command):
    """Finish taking back a staged change whose withdrawal the request that began it gave up
    (``ScheduledChange.withdrawal_given_up``): its writes are sent again under the same keys,
    which the provider replays if the first reached it, and the change ends ``canceled``
    (``withdrawal_finished``). Published by beat's sweep (``command_id``
    ``withdraw:{change_id}:{lease}``); a change no longer held does nothing."""

    TASK_NAME: ClassVar[str] = "subscriptions.finish_staged_withdrawal"
    QUEUE: ClassVar[str] = "subscriptions"
    PRIORITY: ClassVar[Priority] = Priority.BULK

    change_id: ResourceId


class PlanChanged(Result):
    """The phase the request leads to (the HTTP response is ``{"phase": …}``).

    ``change`` is the change made (``None`` when upcoming changes were canceled);
    ``canceled_changes`` the ids of the pending changes it canceled or replaced.
    """

    phase: Phase
    subscription_id: str
    change: dict[str, Any] | None = None
    canceled_changes: list[str] = Field(default_factory=list)


class ScheduledChangeOutcome(Result):
    """Where a change ended: ``applied`` (with its lag), ``skipped`` (with the reason)…"""

    change: dict[str, Any]
