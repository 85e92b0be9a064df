"""Every provider call a command makes, recorded around the call (``domain/provider/calls.py``).

:class:`RecordedProvider` is the :class:`~domain.ports.provider.BillingProvider` the handlers are
given: it passes each call on, then records what was asked (the operation, its subject, its
idempotency key), for which command (the one the runner bound, ``application.log_context``), and
how it ended. Handlers do not change: a registration retried four times and replayed once
shows five calls under one key.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeVar

from application import log_context
from domain.billing.accounts import ProviderCustomer
from domain.drift.report import BilledInvoice, RemoteCustomer, RemoteSubscription
from domain.errors import CommandError, TransientError
from domain.operations.console import InvoiceView
from domain.ports.application import Clock
from domain.ports.provider import BillingProvider
from domain.provider.calls import CallOutcome, ProviderCall, ProviderCallLog
from domain.provider.rate_budget import RateLimited
from domain.provider.sync import ProviderCustomerState, RegisteredEndpoint
from domain.redaction import mask_text
from domain.subscriptions.change_previews import ChangePreview
from domain.subscriptions.plans import ProviderPlan, ProviderPrice
from domain.subscriptions.proration import PaymentBehavior, ProrationBehavior
from domain.subscriptions.subscription import ProviderSubscription, SubscriptionTerms

logger = logging.getLogger(__name__)
T = TypeVar("T")


def current_command_id() -> str | None:
    """The command the runner is running in this context, if any."""
    command_id = log_context.current().get("command_id")
    return command_id if isinstance(command_id, str) and command_id != "(invalid)" else None


def _outcome(error: BaseException) -> tuple[CallOutcome, str]:
    if isinstance(error, TransientError):
        return CallOutcome.RETRYABLE, error.message
    if isinstance(error, CommandError):
        return CallOutcome.REFUSED, f"{error.code.name}: {error.message}"
    return CallOutcome.CRASHED, f"{type(error).__name__}: {error}"


class RecordedProvider:
    """``provider``, with each call of a command (and each write) kept in ``log``."""

    def __init__(self, provider: BillingProvider, log: ProviderCallLog, clock: Clock) -> None:
        self._provider = provider
        self._log = log
        self._clock = clock

    @property
    def name(self) -> str:
        return self._provider.name

    def _recorded(
        self, operation: str, subject: str | None, key: str | None, call: Callable[[], T]
    ) -> T:
        command_id = current_command_id()
        if command_id is None and key is None:
            return call()  # a read outside any command: not part of anyone's story
        started_at = self._clock.now()
        began = time.perf_counter()
        outcome: CallOutcome | None = CallOutcome.SUCCEEDED
        error: str | None = None
        try:
            return call()
        except RateLimited:
            outcome = None  # the budget held the call back: nothing was sent
            raise
        except BaseException as failure:
            outcome, error = _outcome(failure)
            raise
        finally:
            if outcome is not None:
                self._keep(
                    ProviderCall(
                        operation=operation,
                        subject=subject,
                        command_id=command_id,
                        idempotency_key=key,
                        outcome=outcome,
                        error=None if error is None else mask_text(error),
                        started_at=started_at,
                        duration_ms=round((time.perf_counter() - began) * 1000),
                    )
                )

    def _keep(self, call: ProviderCall) -> None:
        try:
            self._log.record(call)
        except Exception:  # the call matters more than its record
            logger.warning("could not record the provider call %s", call.operation, exc_info=True)

    # --- the port ----------------------------------------------------------------------------

    def create_customer(self, customer: ProviderCustomer, *, idempotency_key: str) -> str:
        return self._recorded(
            "create_customer",
            f"billing_account:{customer.billing_account_id}",
            idempotency_key,
            lambda: self._provider.create_customer(customer, idempotency_key=idempotency_key),
        )

    def find_customer(self, billing_account_id: str) -> str | None:
        return self._recorded(
            "find_customer",
            f"billing_account:{billing_account_id}",
            None,
            lambda: self._provider.find_customer(billing_account_id),
        )

    def get_customer(self, customer_id: str) -> ProviderCustomerState:
        return self._recorded(
            "get_customer",
            f"provider_customer:{customer_id}",
            None,
            lambda: self._provider.get_customer(customer_id),
        )

    def register_webhook_endpoint(
        self, url: str, event_types: Sequence[str], known_ids: set[str]
    ) -> RegisteredEndpoint:
        return self._provider.register_webhook_endpoint(url, event_types, known_ids)

    def create_plan_price(self, plan: ProviderPlan, *, idempotency_key: str) -> ProviderPrice:
        return self._recorded(
            "create_plan_price",
            f"plan:{plan.plan_id}",
            idempotency_key,
            lambda: self._provider.create_plan_price(plan, idempotency_key=idempotency_key),
        )

    def create_subscription(
        self,
        customer_id: str,
        price_id: str,
        terms: SubscriptionTerms,
        *,
        metadata: dict[str, str],
        idempotency_key: str,
    ) -> ProviderSubscription:
        subscription_id = metadata.get("subscription_id")
        return self._recorded(
            "create_subscription",
            f"subscription:{subscription_id}"
            if subscription_id
            else f"provider_customer:{customer_id}",
            idempotency_key,
            lambda: self._provider.create_subscription(
                customer_id, price_id, terms, metadata=metadata, idempotency_key=idempotency_key
            ),
        )

    def get_subscription(self, provider_id: str) -> ProviderSubscription:
        return self._recorded(
            "get_subscription",
            f"provider_subscription:{provider_id}",
            None,
            lambda: self._provider.get_subscription(provider_id),
        )

    def change_subscription_price(
        self,
        provider_id: str,
        item_id: str,
        price_id: str,
        *,
        proration_behavior: ProrationBehavior,
        idempotency_key: str,
        proration_date: datetime | None = None,
        payment_behavior: PaymentBehavior | None = None,
    ) -> ProviderSubscription:
        return self._recorded(
            "change_subscription_price",
            f"provider_subscription:{provider_id}",
            idempotency_key,
            lambda: self._provider.change_subscription_price(
                provider_id,
                item_id,
                price_id,
                proration_behavior=proration_behavior,
                idempotency_key=idempotency_key,
                proration_date=proration_date,
                payment_behavior=payment_behavior,
            ),
        )

    def preview_change(
        self,
        provider_id: str,
        item_id: str,
        price_id: str,
        *,
        proration_behavior: ProrationBehavior,
        proration_date: datetime,
    ) -> ChangePreview:
        return self._recorded(
            "preview_change",
            f"provider_subscription:{provider_id}",
            None,
            lambda: self._provider.preview_change(
                provider_id,
                item_id,
                price_id,
                proration_behavior=proration_behavior,
                proration_date=proration_date,
            ),
        )

    def list_customers(self) -> list[RemoteCustomer]:
        return self._recorded("list_customers", None, None, self._provider.list_customers)

    def list_subscriptions(self, customer_id: str | None = None) -> list[RemoteSubscription]:
        return self._recorded(
            "list_subscriptions",
            None if customer_id is None else f"provider_customer:{customer_id}",
            None,
            lambda: self._provider.list_subscriptions(customer_id),
        )

    def find_subscription(
        self, customer_id: str, subscription_id: str
    ) -> ProviderSubscription | None:
        return self._recorded(
            "find_subscription",
            f"subscription:{subscription_id}",
            None,
            lambda: self._provider.find_subscription(customer_id, subscription_id),
        )

    def list_invoices(self, provider_subscription_id: str, limit: int) -> list[InvoiceView]:
        return self._recorded(
            "list_invoices",
            f"provider_subscription:{provider_subscription_id}",
            None,
            lambda: self._provider.list_invoices(provider_subscription_id, limit),
        )

    def list_billed_invoices(
        self, provider_subscription_id: str, limit: int
    ) -> list[BilledInvoice]:
        return self._recorded(
            "list_billed_invoices",
            f"provider_subscription:{provider_subscription_id}",
            None,
            lambda: self._provider.list_billed_invoices(provider_subscription_id, limit),
        )
