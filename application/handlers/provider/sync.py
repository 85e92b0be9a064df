"""Stripe's truth flowing in: re-read an object from Stripe and bring our rows in line.

One handler serves the Stripe webhook endpoint's commands (one per Stripe event), beat's
reconciliation sweep and operators. It never trusts the event's copy of the object: it reads
the object again, outside any transaction, so that deliveries in any order, twice, or late all
leave our rows equal to what Stripe holds now.

* A subscription: its state, period, item, ``cancel_at`` and the plan of its price follow
  Stripe (except while a change staged ahead of its boundary holds the new price there: its
  plan takes effect here at the boundary). A subscription that ended at Stripe skips its
  pending changes.
* A customer: deleted at Stripe → the account says so (state ``deleted``,
  ``customer_deleted_at``), its subscriptions read ``canceled`` and their pending changes are
  skipped.

What changed is emitted as events (``subscription.synced``,
``billing_account.customer_deleted``) and returned as drift kinds, which the worker counts
(``billing_stripe_drift_total{kind}``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import Any

from application.handlers.subscriptions.renewal_checks import check_due_renewals
from application.requests.operator_requests import ResyncStripeObject
from application.requests.sweeps import CheckDueRenewals, ReconcileWithStripe
from domain.billing.accounts import BillingAccount
from domain.drift.report import DriftKind, RemoteCustomer, RemoteSubscription
from domain.errors import CommandError, GoneAtProvider
from domain.events.billing_accounts import BillingAccountCustomerDeleted
from domain.events.subscriptions import PlanChangeSkipped, SubscriptionSynced
from domain.ports.application import HandlerContext
from domain.ports.repositories import UnitOfWork
from domain.provider.pages import ListedPage, ProviderWalk, WalkedList
from domain.provider.rate_budget import Priority, calls_at
from domain.provider.sync import ObjectType, StripeObjectSynced, SyncSource, SyncStripeObject
from domain.subscriptions.change_states import ChangeReason, ChangeState
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import (
    ProviderSubscription,
    Subscription,
    SubscriptionState,
)

logger = logging.getLogger(__name__)

DRIFT_OF_FIELD = {
    "state": "status",
    "current_period_start": "period",
    "current_period_end": "period",
    "plan_id": "plan",
    "cancel_at": "cancel_at",
    "provider_item_id": "item",
}
"""The drift kind each followed field counts as."""


def sync_stripe_object(command: SyncStripeObject, svc: HandlerContext) -> StripeObjectSynced:
    """Bring our rows in line with the Stripe object the command names."""
    return resync_stripe_object(
        ResyncStripeObject(
            object_type=command.object_type,
            object_id=command.object_id,
            source=command.source,
            event_id=command.event_id,
            command_id=command.command_id,
        ),
        svc,
    )


def resync_stripe_object(request: ResyncStripeObject, svc: HandlerContext) -> StripeObjectSynced:
    """Bring our rows in line with the Stripe object the request names (the queued command,
    an operator, beat's reconciliation)."""
    if request.object_type == "customer":
        return _sync_customer(
            request.object_id, svc, source=request.source, command_id=request.command_id
        )
    return _sync_subscription(
        request.object_id,
        svc,
        source=request.source,
        provider_event_id=request.event_id,
        command_id=request.command_id,
    )


@dataclass(frozen=True)
class ReadsOf:
    """Where our copy of a Stripe object stands: when its last read from Stripe began
    (``None``: never), and since when we keep it (``None``: not ours)."""

    last_read: datetime | None
    kept_since: datetime | None


@dataclass(frozen=True)
class FindReadsOf:
    """Ask where our copy of the Stripe object ``object_id`` stands (the webhook endpoint,
    before it records a sync of it)."""

    object_type: ObjectType
    object_id: str


def reads_of(query: FindReadsOf, svc: HandlerContext) -> ReadsOf:
    """Where our copy of the Stripe object stands (one indexed read)."""
    with svc.unit_of_work() as uow:
        found: BillingAccount | Subscription | None
        if query.object_type == "customer":
            found = uow.billing_accounts.by_provider_id(query.object_id)
        else:
            found = uow.subscriptions.by_provider_id(query.object_id)
    if found is None:
        return ReadsOf(last_read=None, kept_since=None)
    return ReadsOf(last_read=found.synced_at, kept_since=found.created_at)


def _sync_subscription(
    provider_id: str,
    svc: HandlerContext,
    *,
    source: SyncSource,
    provider_event_id: str | None = None,
    command_id: str | None = None,
) -> StripeObjectSynced:
    with svc.unit_of_work() as uow:
        known = uow.subscriptions.by_provider_id(provider_id)
    if known is None:  # not ours: the drift report's business
        return StripeObjectSynced(object_type="subscription", object_id=provider_id, ours=False)
    read_at = svc.clock.now()  # synced_at: what Stripe held at least from then on is here
    try:
        with calls_at(Priority.BULK):
            remote = svc.billing_provider().get_subscription(provider_id)
    except GoneAtProvider:  # any other refusal fails this read, and is read again later
        logger.warning("subscription %s is gone at the provider", provider_id)
        with svc.unit_of_work() as uow:  # read: the sweep moves on to the others
            gone = uow.subscriptions.by_provider_id(provider_id, for_update=True)
            assert gone is not None
            gone.synced_at = read_at
            uow.subscriptions.save(gone)
            uow.commit()
        return StripeObjectSynced(
            object_type="subscription", object_id=provider_id, ours=True, drift=["missing"]
        )
    return _follow_subscription(
        remote,
        read_at,
        svc,
        source=source,
        provider_event_id=provider_event_id,
        command_id=command_id,
    )


def _follow_subscription(
    remote: ProviderSubscription,
    read_at: datetime,
    svc: HandlerContext,
    *,
    source: SyncSource,
    provider_event_id: str | None = None,
    command_id: str | None = None,
    unless_read_since: bool = False,
) -> StripeObjectSynced:
    """Bring our subscription in line with ``remote``, read from Stripe in a read that
    began at ``read_at``. With ``unless_read_since``, a row read again since (a webhook's
    sync while the sweep's page waited) keeps what that fresher read found."""
    provider_id = remote.id
    with svc.unit_of_work() as uow:
        subscription = uow.subscriptions.by_provider_id(provider_id, for_update=True)
        assert subscription is not None  # subscriptions are never deleted
        if (
            unless_read_since
            and subscription.synced_at is not None
            and subscription.synced_at > read_at
        ):
            return StripeObjectSynced(object_type="subscription", object_id=provider_id, ours=True)
        now = svc.clock.now()
        plan = uow.plans.by_provider_price(remote.price_id)
        pending = uow.scheduled_changes.pending_for(subscription.id, for_update=True)
        changes = subscription.follow(
            remote,
            plan.id if plan is not None else None,
            expected_price=_price_in_flight(uow, pending),
            now=now,
        )
        subscription.synced_at = read_at
        drift = sorted({DRIFT_OF_FIELD[name] for name in changes})
        if plan is None:
            drift.append("unknown_price")
        uow.subscriptions.save(subscription)
        if changes:
            uow.events.add(
                SubscriptionSynced.of(
                    subscription,
                    changes,
                    source=source,
                    provider_event_id=provider_event_id,
                    command_id=command_id,
                    now=now,
                )
            )
        if subscription.state.is_over:
            _skip_pending(uow, subscription, ChangeReason.subscription_in(subscription.state), now)
        uow.commit()
    if changes:
        logger.info("subscription %s follows Stripe: %s", subscription.id, sorted(changes))
    return StripeObjectSynced(
        object_type="subscription",
        object_id=provider_id,
        ours=True,
        changes=changes,
        drift=drift,
    )


def _sync_customer(
    customer_id: str, svc: HandlerContext, *, source: SyncSource, command_id: str | None = None
) -> StripeObjectSynced:
    with svc.unit_of_work() as uow:
        known = uow.billing_accounts.by_provider_id(customer_id)
    if known is None:
        return StripeObjectSynced(object_type="customer", object_id=customer_id, ours=False)
    read_at = svc.clock.now()
    with calls_at(Priority.BULK):
        remote = svc.billing_provider().get_customer(customer_id)
    changes: dict[str, list[Any]] = {}
    with svc.unit_of_work() as uow:
        account = uow.billing_accounts.by_provider_id(customer_id, for_update=True)
        assert account is not None
        now = svc.clock.now()
        account.synced_at = read_at
        state_before = account.state.value
        if remote.deleted and account.customer_deleted(now):
            changes["customer_deleted_at"] = [None, now.isoformat()]
            changes["state"] = [state_before, account.state.value]
            uow.events.add(
                BillingAccountCustomerDeleted.of(account, command_id=command_id, now=now)
            )
            for subscription in uow.subscriptions.of_account(account.id):
                _end_with_the_customer(uow, subscription, source, command_id, now)
        uow.billing_accounts.save(account)
        uow.commit()
    if changes:
        logger.warning("billing account %s: its Stripe customer was deleted", account.id)
    return StripeObjectSynced(
        object_type="customer",
        object_id=customer_id,
        ours=True,
        changes=changes,
        drift=["customer_deleted"] if changes else [],
    )


def _end_with_the_customer(
    uow: UnitOfWork,
    subscription: Subscription,
    source: SyncSource,
    command_id: str | None,
    now: datetime,
) -> None:
    """Stripe cancels a deleted customer's subscriptions: ours read so, and their pending
    changes are skipped."""
    if subscription.state.is_over:
        return
    locked = uow.subscriptions.get(subscription.id, for_update=True)
    assert locked is not None
    changes = {"state": [locked.state.value, SubscriptionState.CANCELED.value]}
    locked.state = SubscriptionState.CANCELED
    locked.updated_at = now
    uow.subscriptions.save(locked)
    uow.events.add(
        SubscriptionSynced.of(
            locked, changes, source=source, provider_event_id=None, command_id=command_id, now=now
        )
    )
    _skip_pending(uow, locked, ChangeReason.CUSTOMER_DELETED, now)


def _skip_pending(
    uow: UnitOfWork, subscription: Subscription, reason: ChangeReason, now: datetime
) -> None:
    """The subscription is over: a change waiting for it will never be made. One being sent
    right now (``applying``) is left to its worker, which finds the subscription over."""
    pending = uow.scheduled_changes.pending_for(subscription.id, for_update=True)
    if pending is None or pending.state is ChangeState.APPLYING:
        return
    pending.skip(reason, now)
    uow.scheduled_changes.save(pending)
    uow.events.add(
        PlanChangeSkipped.of(pending, command_id=None, now=now, subscription=subscription)
    )


def _price_in_flight(uow: UnitOfWork, pending: ScheduledChange | None) -> str | None:
    """The price a change being made or staged holds at Stripe ahead of taking effect here:
    the sync leaves the plan to that change."""
    if pending is None or pending.state not in (ChangeState.APPLYING, ChangeState.STAGED):
        return None
    plan = uow.plans.get(pending.target_plan_id)
    return plan.provider_price_id if plan is not None else None


def reconcile_with_stripe(sweep: ReconcileWithStripe, svc: HandlerContext) -> dict[str, int]:
    """Beat's backstop for webhooks that are down, late or never configured (issue 46: a
    pass over a million subscriptions in pages, bound by Stripe's read rate).

    With ``sweep.reads`` Stripe reads (calls), at bulk priority:

    1. the renewals due for a check (``application/handlers/subscriptions/renewal_checks.py``);
    2. up to half of what is left on the rows the last completed pass over their list did
       not show (each read alone: gone at Stripe is drift ``missing``, a deleted customer
       ``customer_deleted``);
    3. the rest on the walk: the next pages of Stripe's customer list (a fifth) and of its
       subscription list, from where the last run stopped, each page compared in bulk with
       our rows and only the rows that differ brought in line (from the listed object: a
       read as fresh as a retrieve). A run's walk stops at the end of a pass;
    4. what is still left, on the rows a pass completed in this run did not show.

    Returns the drift found, by kind."""
    renewals = check_due_renewals(CheckDueRenewals(sweep.reads), svc)
    found: dict[str, int] = {}
    if renewals.billed_wrong:
        found[DriftKind.RENEWAL_MISMATCH.value] = renewals.billed_wrong
    reads = sweep.reads - renewals.reads
    if reads <= 0:
        return found
    with calls_at(Priority.BULK):
        reads -= _read_unseen(svc, reads // 2, found)
        plans = _plan_of_price(svc)
        customer_pages = min(reads - 1, max(1, reads // 5)) if reads > 1 else 0
        walked = _walk(WalkedList.CUSTOMERS, customer_pages, svc, _compare_customers, found)
        walked += _walk(
            WalkedList.SUBSCRIPTIONS,
            reads - walked,
            svc,
            partial(_compare_subscriptions, plans),
            found,
        )
        reads -= walked
        if reads > 0:
            _read_unseen(svc, reads, found)
    if found:
        logger.warning("reconciliation with Stripe found drift: %s", found)
    return found


PageComparison = Callable[[ListedPage[Any], datetime, HandlerContext], list[StripeObjectSynced]]
"""Compares one listed page with our rows and brings in line those that differ."""


def _walk(
    listed: WalkedList,
    pages: int,
    svc: HandlerContext,
    compare: PageComparison,
    found: dict[str, int],
) -> int:
    """Read up to ``pages`` pages of the list ``listed`` from where its walk stands, each
    compared by ``compare``, the walk's place saved after each; stops at the end of a pass.
    Returns the pages read (Stripe calls made). Drift is added to ``found``."""
    if pages <= 0:
        return 0
    with svc.unit_of_work() as uow:
        walk = uow.provider_walks.get(listed) or ProviderWalk(listed)
    provider = svc.billing_provider()
    walked: Iterator[ListedPage[Any]] = (
        provider.customer_pages(walk.after)
        if listed is WalkedList.CUSTOMERS
        else provider.subscription_pages(walk.after)
    )
    read = 0
    while read < pages:
        read_at = svc.clock.now()
        read += 1
        try:
            page: ListedPage[Any] | None = next(walked, None)
        except CommandError as refusal:  # the sweep's other reads still go ahead
            logger.warning("reconciliation could not read Stripe's %s: %s", listed.value, refusal)
            if walk.after is not None:
                # Likely the object the cursor names is gone (a customer deleted since): the
                # pass cannot resume after it, and a new one starts next time.
                walk.restart(svc.clock.now())
                _save(walk, svc)
            break
        if page is None:  # the list ended on the page before: nothing was read
            read -= 1
            break
        for outcome in compare(page, read_at, svc):
            for kind in outcome.drift:
                found[kind] = found.get(kind, 0) + 1
        walk.page_read(page, read_at)
        _save(walk, svc)
        if not page.has_more:
            break
    return read


def _save(walk: ProviderWalk, svc: HandlerContext) -> None:
    with svc.unit_of_work() as uow:
        uow.provider_walks.save(walk)
        uow.commit()


def _plan_of_price(svc: HandlerContext) -> dict[str, str]:
    """Our plans by their provider price (a handful: read once per run)."""
    with svc.unit_of_work() as uow:
        return {
            plan.provider_price_id: plan.id
            for plan in uow.plans.list()
            if plan.provider_price_id is not None
        }


def _compare_customers(
    page: ListedPage[RemoteCustomer], read_at: datetime, svc: HandlerContext
) -> list[StripeObjectSynced]:
    """A listed customer is not deleted (Stripe lists none that is), which is all the sync of
    a customer looks for: its account is recorded as read, in one statement for the page."""
    with svc.unit_of_work() as uow:
        accounts = uow.billing_accounts.by_provider_ids([remote.id for remote in page.objects])
        uow.billing_accounts.mark_synced([account.id for account in accounts], read_at)
        uow.commit()
    return []


def _compare_subscriptions(
    plan_of_price: dict[str, str],
    page: ListedPage[RemoteSubscription],
    read_at: datetime,
    svc: HandlerContext,
) -> list[StripeObjectSynced]:
    """Our rows of the page's subscriptions, read in one query: those equal to Stripe's are
    recorded as read in one statement; each that differs is brought in line as a webhook's
    sync would, from the listed object (its pending change read with it, under its lock)."""
    listed = {remote.id: remote.subscription for remote in page.objects}
    with svc.unit_of_work() as uow:
        rows = uow.subscriptions.by_provider_ids(list(listed))
        differing = [
            row for row in rows if _differs(row, listed[row.provider_id], plan_of_price, read_at)
        ]
        equal = {row.id for row in rows} - {row.id for row in differing}
        uow.subscriptions.mark_synced(sorted(equal), read_at)
        uow.commit()
    outcomes = []
    for row in differing:
        try:
            outcomes.append(
                _follow_subscription(
                    listed[row.provider_id], read_at, svc, source="sweep", unless_read_since=True
                )
            )
        except CommandError as refusal:  # this one row; the page's others are still followed
            logger.warning("reconciliation could not follow %s: %s", row.provider_id, refusal)
    return outcomes


def _differs(
    row: Subscription,
    remote: ProviderSubscription,
    plan_of_price: dict[str, str],
    read_at: datetime,
) -> bool:
    """Whether following ``remote`` would change the row, or count drift: the sync's own
    decision (``Subscription.follow``), taken on a copy. A price held by a staged change
    counts as differing here; the sync, which reads the change, leaves the plan to it."""
    plan_id = plan_of_price.get(remote.price_id)
    probe = replace(row)
    changes = probe.follow(remote, plan_id, expected_price=None, now=read_at)
    return bool(changes) or plan_id is None or row.billed_price_id != remote.price_id


def _read_unseen(svc: HandlerContext, reads: int, found: dict[str, int]) -> int:
    """Read, one by one, up to ``reads`` rows the last completed pass over their list did not
    show (accounts first, up to a fifth): a subscription gone at Stripe, a deleted
    customer, or a row made after its pass went by. Returns the reads made; drift is added
    to ``found``."""
    if reads <= 0:
        return 0
    with svc.unit_of_work() as uow:
        customers_walk = uow.provider_walks.get(WalkedList.CUSTOMERS)
        subscriptions_walk = uow.provider_walks.get(WalkedList.SUBSCRIPTIONS)
        customers_since = customers_walk.completed_pass_started_at if customers_walk else None
        subscriptions_since = (
            subscriptions_walk.completed_pass_started_at if subscriptions_walk else None
        )
        accounts = (
            uow.billing_accounts.not_read_since(customers_since, max(1, reads // 5))
            if customers_since is not None
            else []
        )
        subscriptions = (
            uow.subscriptions.not_read_since(subscriptions_since, reads - len(accounts))
            if subscriptions_since is not None
            else []
        )
        customer_ids = [
            account.provider_id
            for account_id in accounts
            if (account := uow.billing_accounts.get(account_id)) is not None
            and account.provider_id is not None
        ]
        provider_ids = [
            subscription.provider_id
            for subscription_id in subscriptions
            if (subscription := uow.subscriptions.get(subscription_id)) is not None
        ]
    jobs: list[tuple[str, Callable[[], StripeObjectSynced]]] = [
        (customer_id, partial(_sync_customer, customer_id, svc, source="sweep"))
        for customer_id in customer_ids
    ]
    jobs += [
        (provider_id, partial(_sync_subscription, provider_id, svc, source="sweep"))
        for provider_id in provider_ids
    ]
    for object_id, job in jobs:
        try:
            outcome = job()
        except CommandError as refusal:  # this one object; the others are still read
            logger.warning("reconciliation could not read %s: %s", object_id, refusal)
            continue
        for kind in outcome.drift:
            found[kind] = found.get(kind, 0) + 1
    return len(jobs)
