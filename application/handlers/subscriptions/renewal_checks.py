"""Reading the renewals plan changes took effect at (``domain/subscriptions/renewal_checks.py``):
part of beat's reconciliation sweep, which spends its Stripe reads on the checks due first."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from application.requests.sweeps import CheckDueRenewals
from domain.errors import CommandError
from domain.ports.application import HandlerContext
from domain.subscriptions.renewal_checks import RenewalCheck, RenewalCheckState
from domain.subscriptions.renewals import RENEWAL_INVOICES, BilledPeriod, renewal_of_period

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RenewalsChecked:
    """What one pass of renewal checks did: the Stripe reads it spent, and the periods it
    found billed wrong."""

    reads: int = 0
    billed_wrong: int = 0


def check_due_renewals(sweep: CheckDueRenewals, svc: HandlerContext) -> RenewalsChecked:
    """Read the renewal invoice of up to ``sweep.limit`` checks due (one Stripe read each)
    and record what each shows; a period billed wrong is logged with what it billed."""
    limit, now = sweep.limit, svc.clock.now()
    with svc.unit_of_work() as uow:
        due = uow.renewal_checks.due(now, limit) if limit > 0 else []
        provider_ids = {
            check.id: subscription.provider_id
            for check in due
            if (subscription := uow.subscriptions.get(check.subscription_id)) is not None
        }
        orphans = [check for check in due if check.id not in provider_ids]
        for check in orphans:  # the subscription is gone here: nothing left to judge
            check.stop(now)
            uow.renewal_checks.save(check)
        if orphans:
            uow.commit()
    reads = billed_wrong = 0
    provider = svc.billing_provider() if provider_ids else None
    for check in due:
        provider_id = provider_ids.get(check.id)
        if provider is None or provider_id is None:
            continue
        reads += 1
        try:
            invoices = provider.list_billed_invoices(provider_id, RENEWAL_INVOICES)
        except CommandError as refusal:  # this one check; the others are still read
            logger.warning("could not read the renewal of %s: %s", provider_id, refusal)
            continue
        read = _record(check, renewal_of_period(invoices, check.period_start), svc)
        if read is not None and read.state is RenewalCheckState.BILLED_WRONG:
            billed_wrong += 1
            logger.error(
                "subscription %s (%s) billed wrong after change %s: %s",
                read.subscription_id,
                provider_id,
                read.id,
                read.finding,
            )
    return RenewalsChecked(reads, billed_wrong)


def _record(
    check: RenewalCheck, period: BilledPeriod | None, svc: HandlerContext
) -> RenewalCheck | None:
    """Record what the renewal shows, unless another sweep recorded this check first."""
    with svc.unit_of_work() as uow:
        locked = uow.renewal_checks.get(check.id, for_update=True)
        plan = uow.plans.get(check.plan_id)
        if locked is None or locked.due_at != check.due_at:
            return None  # a concurrent sweep read it first
        if plan is None:
            locked.stop(svc.clock.now())
        else:
            locked.read(period, plan, svc.clock.now())
        uow.renewal_checks.save(locked)
        uow.commit()
    return locked
