"""Our webhook endpoint at Stripe: registered by an operator (or ``up``), its secret kept so
that the API can verify what Stripe sends."""

from __future__ import annotations

from application.requests.operator_requests import ListStripeEndpointSecrets, RegisterStripeEndpoint
from domain.ports.application import HandlerContext
from domain.provider.sync import HANDLED_EVENT_TYPES, StripeEndpoint


def register_stripe_endpoint(
    request: RegisterStripeEndpoint, svc: HandlerContext
) -> StripeEndpoint:
    """Create (or update) our endpoint for ``url`` at Stripe, subscribed to the event types we
    handle at the pinned API version, and keep its secret. An endpoint of that URL whose
    secret we do not have is replaced; the endpoints it replaced are forgotten here."""
    url = request.url
    with svc.unit_of_work() as uow:
        known = {endpoint.id for endpoint in uow.stripe_endpoints.all()}
    registered = svc.billing_provider().register_webhook_endpoint(
        url, sorted(HANDLED_EVENT_TYPES), known
    )
    with svc.unit_of_work() as uow:
        now = svc.clock.now()
        endpoint = uow.stripe_endpoints.get(registered.id)
        if endpoint is None:
            assert registered.secret is not None  # a new endpoint shows its secret
            endpoint = StripeEndpoint(registered.id, url, registered.secret, now, now)
            uow.stripe_endpoints.add(endpoint)
        else:
            endpoint.url, endpoint.updated_at = url, now
            uow.stripe_endpoints.save(endpoint)
        for old in registered.replaced:
            uow.stripe_endpoints.remove(old)
        uow.commit()
    return endpoint


def stripe_endpoint_secrets(request: ListStripeEndpointSecrets, svc: HandlerContext) -> list[str]:
    """The secrets of our endpoints at Stripe (newest first): any of them verifies."""
    with svc.unit_of_work() as uow:
        return [endpoint.secret for endpoint in reversed(uow.stripe_endpoints.all())]
