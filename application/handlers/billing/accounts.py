"""Billing account handlers: persist the intent, call the provider outside any transaction,
record the outcome.

A registration survives anything because its idempotency key is stored with the account
*before* the provider is called: a crash, a redelivery or a retry calls the provider again
with the same key and gets the same customer. Once the key may have expired at the provider
(Stripe keeps keys for 24 hours), the provider is searched for the account's customer first.
"""

from __future__ import annotations

from domain.billing.account_commands import (
    BillingAccountReady,
    CreateBillingAccount,
    RegisterBillingAccount,
)
from domain.billing.accounts import BillingAccount, BillingAccountState
from domain.billing.organizations import Organization
from domain.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    TransientError,
    UniquenessViolation,
    error_info,
    found,
    resource_info,
)
from domain.events.billing_accounts import (
    BillingAccountCreated,
    BillingAccountRegistered,
    BillingAccountRegistrationFailed,
)
from domain.ports.application import HandlerContext
from domain.ports.repositories import UnitOfWork


def create_billing_account(
    command: CreateBillingAccount, svc: HandlerContext
) -> BillingAccountReady:
    """Open the account (``active`` offline, else ``pending``) and register it online."""
    with svc.unit_of_work() as uow:
        organization = _enabled_organization(uow, command.org_id)
        account = uow.billing_accounts.get(command.billing_account_id, for_update=True)
        if account is None:
            current = uow.billing_accounts.current_for_organization(command.org_id)
            if current is not None:
                raise _already_has_account(current)
            account = BillingAccount.open(
                command.billing_account_id,
                organization,
                command.account,
                offline=command.offline,
                default_currency=svc.billing.default_currency,
                now=svc.clock.now(),
            )
            uow.billing_accounts.add(account)
            uow.events.add(
                BillingAccountCreated.of(
                    account, command_id=command.command_id, now=account.created_at
                )
            )
            try:
                uow.commit()
            except UniquenessViolation:
                # A concurrent command won the race; the retry sees which one (ours: resume;
                # another account: 409).
                raise TransientError("another billing account was created concurrently") from None
        elif account.org_id != command.org_id:
            raise AlreadyExists(
                f"billing account {account.id!r} already exists",
                details=[resource_info("billing_account", account.id)],
            )
    if account.state is BillingAccountState.PENDING:
        account = _register(account.id, svc, command.command_id)
    return BillingAccountReady(
        billing_account=account.to_view(), organization=organization.to_view()
    )


def register_billing_account(
    command: RegisterBillingAccount, svc: HandlerContext
) -> BillingAccountReady:
    """Register an offline (or stuck ``pending``) account; a registered one is returned as is."""
    with svc.unit_of_work() as uow:
        organization = _enabled_organization(uow, command.org_id)
        account = uow.billing_accounts.get(command.billing_account_id)
        if account is None or account.org_id != command.org_id:
            raise NotFound.resource("billing_account", command.billing_account_id)
        account.ensure_customer_exists()
    if not account.is_registered:
        account = _register(account.id, svc, command.command_id)
    return BillingAccountReady(
        billing_account=account.to_view(), organization=organization.to_view()
    )


def _register(account_id: str, svc: HandlerContext, command_id: str) -> BillingAccount:
    with svc.unit_of_work() as uow:
        account = _existing(uow, account_id)
        if account.is_registered:
            return account
        if account.state is BillingAccountState.DISABLED:
            raise FailedPrecondition(
                f"billing account {account_id!r} is disabled",
                details=[error_info("BILLING_ACCOUNT_DISABLED", billing_account_id=account_id)],
            )
        now = svc.clock.now()
        key = account.begin_registration(now)
        search_first = account.registration_outlived(svc.billing.provider_idempotency_window, now)
        uow.billing_accounts.save(account)
        uow.commit()

    provider = svc.billing_provider()
    try:
        provider_id = provider.find_customer(account.id) if search_first else None
        if provider_id is None:
            provider_id = provider.create_customer(account.provider_customer(), idempotency_key=key)
    except InvalidArgument as refusal:
        # The provider refused what we sent; other failures (our credentials, a stored 5xx,
        # the budget) leave the account pending for a replay.
        _registration_refused(account_id, refusal, svc, command_id)
        raise

    with svc.unit_of_work() as uow:
        account = _existing(uow, account_id)
        if not account.is_registered:
            now = svc.clock.now()
            account.registered(provider.name, provider_id, now)
            uow.billing_accounts.save(account)
            uow.events.add(BillingAccountRegistered.of(account, command_id=command_id, now=now))
            uow.commit()
    return account


def _registration_refused(
    account_id: str, refusal: InvalidArgument, svc: HandlerContext, command_id: str
) -> None:
    """The provider said no for good: a pending account never came to be, and is removed
    (the caller was told why, and may send a corrected request); an offline one stays."""
    with svc.unit_of_work() as uow:
        account = _existing(uow, account_id)
        if account.is_registered:
            return
        now = svc.clock.now()
        removed = account.state is BillingAccountState.PENDING
        if removed:
            uow.billing_accounts.remove(account_id)
        else:
            account.abandon_registration(now)
            uow.billing_accounts.save(account)
        uow.events.add(
            BillingAccountRegistrationFailed.of(
                account, refusal.to_body(), removed=removed, command_id=command_id, now=now
            )
        )
        uow.commit()


def _existing(uow: UnitOfWork, account_id: str) -> BillingAccount:
    account = found(
        uow.billing_accounts.get(account_id, for_update=True), "billing_account", account_id
    )
    return account


def _enabled_organization(uow: UnitOfWork, org_id: str) -> Organization:
    organization = found(uow.organizations.get(org_id), "organization", org_id)
    if not organization.is_enabled:
        raise FailedPrecondition(
            f"organization {org_id!r} is disabled",
            details=[error_info("ORGANIZATION_DISABLED", org_id=org_id)],
        )
    return organization


def _already_has_account(current: BillingAccount) -> AlreadyExists:
    return AlreadyExists(
        f"organization {current.org_id!r} already has a billing account ({current.id})",
        details=[
            resource_info("billing_account", current.id, f"state: {current.state.value}"),
            error_info("BILLING_ACCOUNT_EXISTS", billing_account_id=current.id),
        ],
    )
