"""Previews of an immediate plan change: what it would invoice if made now, from the
provider's own preview, at a proration time the answer names. The answered preview is
remembered, for a change naming that time to be checked against it
(``domain/subscriptions/change_previews.py``).
"""

from __future__ import annotations

import contextlib

from application.handlers.subscriptions.change_requests import subscription_under, target_plan
from domain.errors import Internal, InvalidArgument, UniquenessViolation, error_info
from domain.ports.application import HandlerContext
from domain.subscriptions.change_previews import (
    PREVIEW_VALIDITY,
    IssuedPreview,
    PlanChangePreviewed,
    PreviewPlanChange,
    ensure_in_current_period,
    settlement_of,
)
from domain.subscriptions.immediate_changes import immediate_proration


def preview_plan_change(command: PreviewPlanChange, svc: HandlerContext) -> PlanChangePreviewed:
    """What an immediate change to the plan would invoice if made now: the provider's own
    preview, at a proration time the answer names (changes nothing)."""
    with svc.unit_of_work() as uow:
        subscription = subscription_under(uow, command, lock=False)
        plan = target_plan(uow, subscription, command, check_state=False)
        behavior = immediate_proration(
            svc.billing.proration_behavior, uow.plans.get(subscription.plan_id), plan
        )
        price_id = plan.provider_price_id
        if price_id is None:
            raise Internal(
                f"plan {plan.id!r} has no price at the provider",
                details=[error_info("PLAN_WITHOUT_PRICE", plan_id=plan.id)],
            )
    provider = svc.billing_provider()
    remote = provider.get_subscription(subscription.provider_id)
    if remote.state is not subscription.state:
        with svc.unit_of_work() as uow:
            stored = subscription_under(uow, command)
            if stored.synced(remote, svc.clock.now()):
                uow.subscriptions.save(stored)
                uow.commit()
            subscription = stored
    subscription.ensure_accepts_plan_changes()
    # Whole seconds: the provider prorates per second, and a change naming this time must
    # prorate exactly as the preview did.
    proration_date = svc.clock.now().replace(microsecond=0)
    ensure_in_current_period(
        subscription.id, remote.current_period_start, remote.current_period_end, proration_date
    )
    try:
        preview = provider.preview_change(
            remote.id,
            remote.item_id,
            price_id,
            proration_behavior=behavior,
            proration_date=proration_date,
        )
    except InvalidArgument:
        # The provider may have rolled the period over since it was read: then that, not
        # the plan, is why it refused.
        again = provider.get_subscription(remote.id)
        ensure_in_current_period(
            subscription.id, again.current_period_start, again.current_period_end, proration_date
        )
        raise
    _record_preview(
        IssuedPreview.of(
            subscription.id, subscription.plan_id, plan.id, proration_date, svc.clock.now()
        ),
        svc,
    )
    billed_now = behavior == "always_invoice"
    charged_now, carried = settlement_of(preview.amount_due, preview.currency, billed_now)
    return PlanChangePreviewed(
        subscription_id=subscription.id,
        plan_id=plan.id,
        proration_date=proration_date,
        proration_behavior=behavior,
        billed="now" if billed_now else "next_invoice",
        currency=preview.currency,
        amount_due=preview.amount_due,
        subtotal=preview.subtotal,
        total=preview.total,
        lines=[
            {
                "description": line.description,
                "amount": line.amount,
                "proration": line.proration,
                "period_start": line.period_start.isoformat(),
                "period_end": line.period_end.isoformat(),
                "price_id": line.price_id,
                "discount": line.discount,
            }
            for line in preview.lines
        ],
        charged_now=charged_now,
        carried_to_balance=carried,
        total_discount=preview.total_discount,
        starting_balance=preview.starting_balance,
    )


def _record_preview(issued: IssuedPreview, svc: HandlerContext) -> None:
    """Remember the answered preview (the change may name its time for a few minutes), and
    forget the subscription's expired ones."""
    with svc.unit_of_work() as uow:
        uow.change_previews.prune(issued.subscription_id, issued.created_at - PREVIEW_VALIDITY)
        if uow.change_previews.get(issued.id) is None:
            uow.change_previews.add(issued)
        # A concurrent preview of the same change, in the same second, may have recorded it.
        with contextlib.suppress(UniquenessViolation):
            uow.commit()
