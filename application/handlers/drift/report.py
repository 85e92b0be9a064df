"""The drift report (``billing-worker stripe drift``): what Stripe has that we do not, what we
have that Stripe does not, and where they disagree (the rules: ``domain/drift/rules.py``); and
the adoption of what can be linked safely.

The money check reads each of our subscriptions' latest invoices (one list call each, at bulk
priority) and compares its latest renewal with the plan in force at that period's start
(``domain/drift/renewals.py``); ``--skip-invoices`` leaves it out.

Our side is read first, then Stripe's: a registration or a subscription that completes in
between shows as an orphan at Stripe (never as a row whose object is missing), and each
adoption checks its account or subscription again in its own transaction, so what another
process linked meanwhile is left as it is. Stripe's lists are read at bulk priority: the
report never takes the rate budget's burst from interactive commands.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from application.requests.operator_actions import AdoptDrift
from application.requests.operator_requests import AdoptFindings, FindDrift, ReportDrift
from domain.billing.accounts import BillingAccount, BillingAccountState
from domain.drift.report import CustomerLink, Finding, OurSide, ProviderSide, SubscriptionRecord
from domain.drift.rules import find_drift
from domain.errors import (
    AlreadyExists,
    CommandError,
    FailedPrecondition,
    NotFound,
    UniquenessViolation,
    error_info,
    found,
    resource_info,
)
from domain.events.billing_accounts import BillingAccountRegistered
from domain.ports.application import HandlerContext
from domain.provider.rate_budget import Priority, calls_at
from domain.rules import new_id
from domain.subscriptions.change_states import ChangeState
from domain.subscriptions.renewals import RENEWAL_INVOICES
from domain.subscriptions.subscription import Subscription

logger = logging.getLogger(__name__)


def drift_report(request: ReportDrift, svc: HandlerContext) -> list[Finding]:
    """Every difference between Stripe and the database (changes nothing); with
    ``read_invoices``, the money of each subscription's latest renewal too."""
    with svc.unit_of_work() as uow:
        subscriptions = uow.subscriptions.list_all()
        ours = OurSide(
            accounts=uow.billing_accounts.list_all(),
            subscriptions=subscriptions,
            plans=uow.plans.list(),
            pending_changes=uow.scheduled_changes.all_pending(),
            applied_changes=[
                change
                for row in subscriptions
                for change in uow.scheduled_changes.for_subscription(row.id)
                if change.state is ChangeState.APPLIED
            ]
            if request.read_invoices
            else [],
        )
    provider = svc.billing_provider()
    with calls_at(Priority.BULK):
        # Page by page, as our values (a few hundred bytes each), never as the SDK's objects:
        # the rules compare whole sides (duplicates, orphans, rows Stripe lacks), which a
        # million subscriptions' values fit in; the SDK's objects cost ten times the CPU.
        customers = [remote for page in provider.customer_pages() for remote in page.objects]
        listed = [remote for page in provider.subscription_pages() for remote in page.objects]
        at_stripe = {remote.id for remote in listed}
        invoices = (
            {
                row.provider_id: provider.list_billed_invoices(row.provider_id, RENEWAL_INVOICES)
                for row in subscriptions
                if row.provider_id in at_stripe
            }
            if request.read_invoices
            else {}
        )
    return find_drift(ours, ProviderSide(customers, listed, invoices))


@dataclass(frozen=True)
class Adoption:
    """What ``--adopt`` did with one finding."""

    finding: Finding
    adopted: bool
    outcome: str
    """``adopted``, ``needs a person``, or ``not adopted: <why>`` (it changed meanwhile)."""


ADOPTED = "adopted"
NEEDS_A_PERSON = "needs a person"


def adopt_findings(request: AdoptFindings, svc: HandlerContext) -> list[Adoption]:
    """Adopt each finding that can be adopted safely, each in its own transaction; the others
    need a person. A subscription of a customer adopted now is adopted by the next run."""
    adoptions = []
    for finding in request.findings:
        adoption = finding.adoption
        if adoption is None:
            adoptions.append(Adoption(finding, False, NEEDS_A_PERSON))
            continue
        try:
            if isinstance(adoption, CustomerLink):
                link_customer(adoption, svc)
            else:
                record_subscription(adoption, svc)
        except CommandError as refused:
            adoptions.append(Adoption(finding, False, f"not adopted: {refused.message}"))
            continue
        adoptions.append(Adoption(finding, True, ADOPTED))
    return adoptions


def drift_finding(request: FindDrift, svc: HandlerContext) -> Finding:
    """The finding of the drift report read now that ``request.key`` names (the money check
    left out: its findings are never adoptable). ``NotFound`` when there is none any more."""
    for finding in drift_report(ReportDrift(read_invoices=False), svc):
        if finding.key == request.key:
            return finding
    raise NotFound(f"no drift {request.key!r} now: it was adopted or put right meanwhile")


def adopt_drift(request: AdoptDrift, svc: HandlerContext) -> Adoption:
    """Adopt the one finding ``request`` names, as ``stripe drift --adopt`` adopts each."""
    finding = drift_finding(FindDrift(request.finding_key), svc)
    (adoption,) = adopt_findings(AdoptFindings([finding]), svc)
    return adoption


def link_customer(link: CustomerLink, svc: HandlerContext) -> BillingAccount:
    """Register the account with the customer Stripe made for it, as its registration would
    have (``BillingAccountRegistered`` goes out through the outbox). Refused if the account
    got a customer meanwhile, is disabled, or the customer is another account's."""
    provider_name = svc.billing_provider().name
    with svc.unit_of_work() as uow:
        account = found(
            uow.billing_accounts.get(link.billing_account_id, for_update=True),
            "billing_account",
            link.billing_account_id,
        )
        if account.provider_id == link.customer_id:
            return account
        if account.is_registered:
            raise FailedPrecondition(
                f"billing account {account.id!r} is linked to customer {account.provider_id} now",
                details=[resource_info("billing_account", account.id)],
            )
        if account.state is BillingAccountState.DISABLED:
            raise FailedPrecondition(
                f"billing account {account.id!r} is disabled",
                details=[error_info("BILLING_ACCOUNT_DISABLED", billing_account_id=account.id)],
            )
        now = svc.clock.now()
        account.registered(provider_name, link.customer_id, now)
        uow.billing_accounts.save(account)
        uow.events.add(BillingAccountRegistered.of(account, command_id=None, now=now))
        try:
            uow.commit()
        except UniquenessViolation:
            raise FailedPrecondition(
                f"customer {link.customer_id} is linked to another billing account",
                details=[resource_info("billing_account", account.id)],
            ) from None
    logger.info(
        "billing account %s adopted customer %s",
        account.id,
        link.customer_id,
        extra={"billing_account_id": account.id, "customer_id": link.customer_id},
    )
    return account


def record_subscription(record: SubscriptionRecord, svc: HandlerContext) -> Subscription:
    """Record Stripe's subscription as ours, with the id its metadata names (a new one if it
    names no valid id). Refused if the id is taken by another subscription, or the account or
    the plan no longer match it."""
    remote = record.remote
    provider_name = svc.billing_provider().name
    subscription_id = record.subscription_id or new_id("sub")
    with svc.unit_of_work() as uow:
        existing = uow.subscriptions.get(subscription_id)
        if existing is not None:
            if existing.provider_id == remote.id:
                return existing
            raise AlreadyExists(
                f"subscription {subscription_id!r} exists, linked to {existing.provider_id}",
                details=[resource_info("subscription", subscription_id)],
            )
        account = found(
            uow.billing_accounts.get(record.billing_account_id),
            "billing_account",
            record.billing_account_id,
        )
        account.ensure_customer_exists()
        if account.state is BillingAccountState.DISABLED:
            raise FailedPrecondition(
                f"billing account {account.id!r} is disabled",
                details=[error_info("BILLING_ACCOUNT_DISABLED", billing_account_id=account.id)],
            )
        if account.provider_id != remote.customer_id:
            raise FailedPrecondition(
                f"billing account {account.id!r} is no longer linked to customer "
                f"{remote.customer_id}",
                details=[resource_info("billing_account", account.id)],
            )
        plan = found(uow.plans.get(record.plan_id), "plan", record.plan_id)
        if plan.provider_price_id != remote.subscription.price_id:
            raise FailedPrecondition(
                f"plan {plan.name!r} no longer has price {remote.subscription.price_id}",
                details=[resource_info("plan", plan.id)],
            )
        subscription = Subscription.started(
            subscription_id, account.id, plan, provider_name, remote.subscription, svc.clock.now()
        )
        uow.subscriptions.add(subscription)
        try:
            uow.commit()
        except UniquenessViolation:
            raise FailedPrecondition(
                f"Stripe subscription {remote.id} was recorded meanwhile",
                details=[resource_info("subscription", subscription_id)],
            ) from None
    logger.info(
        "subscription %s adopted Stripe subscription %s",
        subscription.id,
        remote.id,
        extra={"subscription_id": subscription.id, "provider_subscription_id": remote.id},
    )
    return subscription
