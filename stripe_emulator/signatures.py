"""Webhook signatures: the ``Stripe-Signature`` header and the endpoints' secrets.

``t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">``, one ``v1`` per secret that signs,
exactly as Stripe signs (``stripe.Webhook.construct_event`` verifies it). The emulator's
deliveries put **wall-clock** time in ``t`` (see :mod:`stripe_emulator.webhooks`). An endpoint
signs with its secret and, after a roll (``POST /_emulator/webhooks/endpoints/{id}/roll_secret``,
like the Dashboard's "roll secret"), with the previous one too until it expires.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterable
from typing import Any

from stripe_emulator.ids import new_id
from stripe_emulator.state import Store

Record = dict[str, Any]


def sign(payload: bytes, secrets: Iterable[str], timestamp: int) -> str:
    """A ``Stripe-Signature`` header value (one ``v1`` per secret)."""
    signed = str(timestamp).encode() + b"." + payload
    signatures = [
        "v1=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest() for secret in secrets
    ]
    return ",".join([f"t={timestamp}", *signatures])


def signing_secrets(store: Store, endpoint_id: str) -> list[str]:
    """The endpoint's secret, and a rolled one while it still signs (wall clock)."""
    secrets = [store.webhook_secrets.get(endpoint_id, "")]
    rolled = store.webhook_rolled.get(endpoint_id)
    if rolled is not None:
        if time.time() < rolled[1]:
            secrets.append(rolled[0])
        else:
            del store.webhook_rolled[endpoint_id]
    return secrets


def roll_secret(store: Store, endpoint_id: str, expires_in: float) -> Record:
    """Give the endpoint a new secret; the old one keeps signing for ``expires_in`` seconds
    (wall clock; 0: it stops now), as the Dashboard's "roll secret" does."""
    old = store.webhook_secrets[endpoint_id]
    store.webhook_secrets[endpoint_id] = new_id("whsec")
    expires_at = time.time() + expires_in
    if expires_in > 0:
        store.webhook_rolled[endpoint_id] = [old, expires_at]
    else:
        store.webhook_rolled.pop(endpoint_id, None)
    return {
        "endpoint": endpoint_id,
        "secret": store.webhook_secrets[endpoint_id],
        "previous_secret_expires_at": expires_at if expires_in > 0 else None,
    }
