"""The drift of customers: a customer at the provider that names an account we do not have,
or one linked to another customer; several customers naming one account; an account whose
customer the provider does not have. A customer that alone names a pending or active account
of ours without a customer (its registration stopped after the provider made it) can be
adopted (``CustomerLink``).
"""

from __future__ import annotations

from collections import defaultdict

from domain.billing.accounts import BillingAccount, BillingAccountState
from domain.drift.report import (
    CustomerLink,
    DriftKind,
    Finding,
    OurSide,
    ProviderSide,
    RemoteCustomer,
)

_NO_CUSTOMER_MEANT = (
    "if it was made for an account that was removed or never committed, delete it at Stripe "
    "(first check it has no subscriptions, invoices or payments)"
)


def customer_drift(ours: OurSide, theirs: ProviderSide) -> list[Finding]:
    accounts = {account.id: account for account in ours.accounts}
    linked = {account.provider_id: account for account in ours.accounts if account.provider_id}
    naming: dict[str, list[RemoteCustomer]] = defaultdict(list)
    for customer in theirs.customers:
        if customer.billing_account_id is not None:
            naming[customer.billing_account_id].append(customer)
    findings: list[Finding] = []
    for account_id in sorted(naming):
        named = sorted(naming[account_id], key=lambda customer: (customer.created, customer.id))
        account = accounts.get(account_id)
        if account is not None and len(named) > 1:
            findings.append(_duplicates(account, named))
            continue
        for customer in named:
            finding = _named_customer(customer, account, linked.get(customer.id))
            if finding is not None:
                findings.append(finding)
    customer_ids = {customer.id for customer in theirs.customers}
    for account in sorted(ours.accounts, key=lambda account: account.id):
        if (
            account.provider_id is not None
            and account.provider_id not in customer_ids
            and account.state is not BillingAccountState.DISABLED
            and account.state is not BillingAccountState.DELETED  # known: not drift
        ):
            findings.append(
                Finding(
                    DriftKind.MISSING_CUSTOMER,
                    f"billing account {account.id} is linked to customer {account.provider_id}, "
                    "which Stripe does not have (deleted there?)",
                    "find out who deleted it (Stripe dashboard: Developers > Events); the "
                    "account cannot be billed until it has a customer again",
                    billing_account_id=account.id,
                    customer_ids=(account.provider_id,),
                )
            )
    return findings


def _duplicates(account: BillingAccount, named: list[RemoteCustomer]) -> Finding:
    ids = tuple(customer.id for customer in named)
    keep = account.provider_id if account.provider_id in ids else named[0].id
    why = "the one the account is linked to" if keep == account.provider_id else "the oldest"
    return Finding(
        DriftKind.DUPLICATE_CUSTOMERS,
        f"{len(named)} customers name billing account {account.id}: {', '.join(ids)}",
        f"keep {keep} ({why}: registration takes the oldest); move any subscription, payment "
        "method or balance of the others to it, then delete the others at Stripe",
        billing_account_id=account.id,
        customer_ids=ids,
    )


def _named_customer(
    customer: RemoteCustomer, account: BillingAccount | None, linked_to: BillingAccount | None
) -> Finding | None:
    """The finding about the only customer naming ``account`` (``None``: we do not have it)."""
    named_id = customer.billing_account_id
    if linked_to is not None:
        if linked_to.id == named_id:
            return None
        return Finding(
            DriftKind.CUSTOMER_MISMATCH,
            f"customer {customer.id} names billing account {named_id} but billing account "
            f"{linked_to.id} is linked to it",
            "find out which account it belongs to; correct its metadata at Stripe "
            "(billing_account_id) or the account's link",
            billing_account_id=linked_to.id,
            customer_ids=(customer.id,),
        )
    if account is None:
        return Finding(
            DriftKind.ORPHAN_CUSTOMER,
            f"customer {customer.id} names billing account {named_id}, which we do not have",
            _NO_CUSTOMER_MEANT,
            billing_account_id=named_id,
            customer_ids=(customer.id,),
        )
    if account.provider_id is not None:
        return Finding(
            DriftKind.CUSTOMER_MISMATCH,
            f"customer {customer.id} names billing account {account.id}, which is linked to "
            f"customer {account.provider_id}",
            f"keep {account.provider_id} (the account's); move anything on {customer.id} to "
            "it, then delete it at Stripe",
            billing_account_id=account.id,
            customer_ids=(customer.id, account.provider_id),
        )
    if account.state is BillingAccountState.DISABLED:
        return Finding(
            DriftKind.ORPHAN_CUSTOMER,
            f"customer {customer.id} names billing account {account.id}, which is disabled and "
            "has no customer",
            _NO_CUSTOMER_MEANT,
            billing_account_id=account.id,
            customer_ids=(customer.id,),
        )
    return Finding(
        DriftKind.ORPHAN_CUSTOMER,
        f"customer {customer.id} names billing account {account.id} ({account.state.value}), "
        "which has no customer: its registration stopped after Stripe made it",
        f"adopt: register billing account {account.id} with customer {customer.id}",
        billing_account_id=account.id,
        customer_ids=(customer.id,),
        adoption=CustomerLink(account.id, customer.id),
    )
