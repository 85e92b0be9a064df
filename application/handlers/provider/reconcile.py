"""Beat's reconciliation with Stripe, the backstop for webhooks that are down, late or never
configured: a walk over Stripe's customer and subscription lists, a page per read, kept where
it stopped between runs (``provider_walks``), each page compared in bulk with our rows and only
the rows that differ brought in line by the sync (``application/handlers/provider/sync.py``).
A pass over a million subscriptions is about 10,000 reads, bound by Stripe's read rate (issue
46).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any

# The sync's own steps, private to this package: the walk follows Stripe as the sync does.
from application.handlers.provider.sync import (
    _follow_subscription,
    _read_and_follow_customer,
    _read_and_follow_subscription,
)
from application.handlers.subscriptions.renewal_checks import check_due_renewals
from application.requests.sweeps import CheckDueRenewals, ReconcileWithStripe
from domain.drift.report import DriftKind, RemoteCustomer, RemoteSubscription
from domain.errors import CommandError
from domain.ports.application import HandlerContext
from domain.provider.pages import ListedPage, ProviderWalk, WalkedList
from domain.provider.rate_budget import Priority, calls_at
from domain.provider.sync import StripeObjectSynced
from domain.subscriptions.subscription import ProviderSubscription, Subscription

logger = logging.getLogger(__name__)


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
    counts as differing here; the sync, which reads the change, leaves the plan to it. So
    does a discount put on or taken off at Stripe (what the discounted gauge counts)."""
    plan_id = plan_of_price.get(remote.price_id)
    probe = replace(row)
    changes = probe.follow(remote, plan_id, expected_price=None, now=read_at)
    return (
        bool(changes)
        or plan_id is None
        or row.billed_price_id != remote.price_id
        or row.billed_discount != remote.discount_summary
    )


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
        (customer_id, partial(_read_and_follow_customer, customer_id, svc, source="sweep"))
        for customer_id in customer_ids
    ]
    jobs += [
        (provider_id, partial(_read_and_follow_subscription, provider_id, svc, source="sweep"))
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
