"""An immediate change's writes at the provider: :func:`send_change`, the one update, and,
when the provider answers that the customer must authenticate its payment,
:func:`send_as_pending_update` (Stripe holds the change until its invoice is paid; the
subscription's sync settles it, ``application/handlers/provider/sync.py``)."""

from __future__ import annotations

from domain.ports.provider import BillingProvider
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import ProviderSubscription, Subscription


def send_change(
    provider: BillingProvider,
    change: ScheduledChange,
    subscription: Subscription,
    price_id: str,
    *,
    read_first: bool,
) -> ProviderSubscription:
    """Replace the subscription item's price at the provider now: one call, under the
    change's idempotency key, which makes any repetition (a retry, a redelivery, a worker
    killed mid-call) a replay of the first. Prorated as of the change's ``effective_at``; when
    the proration is invoiced at once, nothing is made unless the invoice is paid. The
    subscription is read first only when the update cannot be sent blind: its item is not
    known yet, or an earlier attempt may be older than the provider's memory of the key
    (then the read tells whether it went through)."""
    item_id = subscription.provider_item_id
    if read_first or item_id is None:
        remote = provider.get_subscription(subscription.provider_id)
        if not change.applies_to(remote.state) or remote.price_id == price_id:
            return remote
        item_id = remote.item_id
    prorated = change.proration_behavior != "none"
    return provider.change_subscription_price(
        subscription.provider_id,
        item_id,
        price_id,
        proration_behavior=change.proration_behavior,
        idempotency_key=change.provider_idempotency_key,
        proration_date=change.effective_at if prorated else None,
        payment_behavior=(
            "error_if_incomplete" if change.proration_behavior == "always_invoice" else None
        ),
    )


def send_as_pending_update(
    provider: BillingProvider,
    change: ScheduledChange,
    subscription: Subscription,
    price_id: str,
) -> ProviderSubscription:
    """The change again, held by the provider until the customer pays its invoice
    (``pending_if_incomplete``, Stripe's way for a payment that needs the customer's
    authentication), under a key of its own: the first write made nothing."""
    item_id = subscription.provider_item_id
    if item_id is None:
        item_id = provider.get_subscription(subscription.provider_id).item_id
    prorated = change.proration_behavior != "none"
    return provider.change_subscription_price(
        subscription.provider_id,
        item_id,
        price_id,
        proration_behavior=change.proration_behavior,
        idempotency_key=change.pending_update_key,
        proration_date=change.effective_at if prorated else None,
        payment_behavior="pending_if_incomplete",
    )
