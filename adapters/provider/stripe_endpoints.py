"""The Stripe adapter's webhook endpoint: ours registered (or brought up to date) at Stripe,
at the pinned API version, for the events we route (``adapters/provider/stripe_events.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters.provider.stripe_requests import STRIPE_API_VERSION, StripeRequests
from domain.provider.rate_budget import CallKind
from domain.provider.sync import RegisteredEndpoint


class StripeEndpoints(StripeRequests):
    """The webhook endpoint operation of :class:`domain.ports.provider.BillingProvider`."""

    def register_webhook_endpoint(
        self, url: str, event_types: Sequence[str], known_ids: set[str]
    ) -> RegisteredEndpoint:
        client = self._client
        listed = self._call(
            CallKind.READ,
            "list webhook endpoints",
            lambda: client.v1.webhook_endpoints.list(params={"limit": 100}),
        )
        existing = [str(endpoint.id) for endpoint in listed.data if endpoint.url == url]
        known = [endpoint_id for endpoint_id in existing if endpoint_id in known_ids]
        if known:
            endpoint_id = known[0]
            update: dict[str, Any] = {"enabled_events": list(event_types), "disabled": False}
            self._call(
                CallKind.WRITE,
                "update webhook endpoint",
                lambda: client.v1.webhook_endpoints.update(
                    endpoint_id,
                    params=update,  # type: ignore[arg-type]
                ),
            )
            return RegisteredEndpoint(endpoint_id, None)
        new: dict[str, Any] = {
            "url": url,
            "enabled_events": list(event_types),
            "api_version": STRIPE_API_VERSION,
            "description": "billing-worker",
        }
        created = self._call(
            CallKind.WRITE,
            "create webhook endpoint",
            lambda: client.v1.webhook_endpoints.create(params=new),  # type: ignore[arg-type]
        )
        for old in existing:  # their secrets are unknown here: replaced by the new one
            self._call(
                CallKind.WRITE,
                "delete webhook endpoint",
                lambda old_id=old: client.v1.webhook_endpoints.delete(old_id),  # type: ignore[misc]
            )
        return RegisteredEndpoint(str(created.id), str(created.secret), tuple(existing))
