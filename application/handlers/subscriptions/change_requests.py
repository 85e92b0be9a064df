"""A plan-change request (a change or its preview) resolved against what we store: the
subscription, if it belongs to the organization's billing account, and the plan asked for,
checked against it.
"""

from __future__ import annotations

from domain.errors import InvalidArgument, NotFound, found
from domain.ports.repositories import UnitOfWork
from domain.subscriptions.change_commands import ChangeSubscriptionPlan
from domain.subscriptions.change_previews import PreviewPlanChange
from domain.subscriptions.plans import Plan
from domain.subscriptions.subscription import Subscription


def subscription_under(
    uow: UnitOfWork, command: ChangeSubscriptionPlan | PreviewPlanChange, *, lock: bool = True
) -> Subscription:
    """The subscription, if it belongs to the billing account of the organization."""
    subscription = uow.subscriptions.get(command.subscription_id, for_update=lock)
    account = uow.billing_accounts.get(command.billing_account_id)
    if (
        subscription is None
        or account is None
        or subscription.billing_account_id != account.id
        or account.org_id != command.org_id
    ):
        raise NotFound.resource("subscription", command.subscription_id)
    account.ensure_customer_exists()
    return subscription


def target_plan(
    uow: UnitOfWork,
    subscription: Subscription,
    command: ChangeSubscriptionPlan | PreviewPlanChange,
    *,
    check_state: bool = True,
) -> Plan:
    """The plan asked for, checked against the subscription (404, then 400s)."""
    assert command.plan is not None  # the command's validation guarantees it
    plan = found(uow.plans.find(command.plan), "plan", command.plan)
    if check_state:
        subscription.ensure_accepts_plan_changes()
    subscription.ensure_not_on(plan)
    plan.ensure_available()
    current = uow.plans.get(subscription.plan_id)
    if current is not None and current.currency != plan.currency:
        raise InvalidArgument.for_fields(
            f"plan {plan.name!r} is billed in {plan.currency}, the subscription in "
            f"{current.currency}",
            [("plan", "must be billed in the subscription's currency")],
        )
    return plan
