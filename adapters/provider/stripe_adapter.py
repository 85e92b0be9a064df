"""The Stripe adapter: the :class:`domain.ports.provider.BillingProvider` for Stripe, made of
its families of operations, and the one way the system builds it.

It speaks to real Stripe or to the project's emulator (``BILLING_STRIPE_API_BASE``) through the
official SDK. Only the modules of ``adapters/provider/`` import ``stripe``; they are cut along
what they talk to Stripe about:

* ``stripe_requests.py``: the client at our pinned API version, each request through the
  account's shared rate budget (``rate_budget.py``) and the metrics, the SDK's retries off
  (the command runner retries, with backoff and jitter, within a budget);
* ``stripe_errors.py``: a Stripe failure as the domain error it means (transient or not);
* ``stripe_customers.py``, ``stripe_subscriptions.py`` (plans and subscriptions),
  ``stripe_invoices.py`` (previews, invoice reads), ``stripe_endpoints.py`` (our webhook
  endpoint): the port's operations, one family each;
* ``stripe_signatures.py``: the signatures of the webhooks Stripe sends us.

What Stripe answers is read into our values by ``stripe_objects.py`` and the field a refusal
blames named by ``stripe_fields.py``; neither needs the SDK. Every write carries an
idempotency key chosen (and persisted) by the caller.

A new operation: its method on the port (``domain/ports/provider.py``), here in the module of
its family, on the fake (``tests/support/fakes/provider.py``), and one row of the recorder's
table (``application/provider_calls.py``).
"""

from __future__ import annotations

from adapters.provider.stripe_customers import StripeCustomers
from adapters.provider.stripe_endpoints import StripeEndpoints
from adapters.provider.stripe_invoices import StripeInvoices
from adapters.provider.stripe_subscriptions import StripeSubscriptions
from domain.errors import FailedPrecondition, error_info
from domain.provider.rate_budget import RateBudget

PROVIDER_NAME = "stripe"


class StripeBillingProvider(StripeCustomers, StripeSubscriptions, StripeInvoices, StripeEndpoints):
    """The :class:`domain.ports.provider.BillingProvider` for Stripe (constructed as
    :class:`adapters.provider.stripe_requests.StripeRequests`)."""

    name = PROVIDER_NAME


def build_provider(
    api_key: str | None,
    api_base: str | None,
    timeout: float,
    budget: RateBudget | None = None,
) -> StripeBillingProvider:
    """The provider for these settings; without a key, online registration is refused."""
    if not api_key:
        raise FailedPrecondition(
            "no billing provider is configured (BILLING_STRIPE_API_KEY is unset): create the "
            "account with offline: true",
            details=[error_info("PROVIDER_NOT_CONFIGURED")],
        )
    return StripeBillingProvider(api_key, api_base=api_base, timeout=timeout, budget=budget)
