"""Stripe events as Stripe sends them: a JSON body and its ``Stripe-Signature``."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from typing import Any

TEST_SECRET = "whsec_tests_first"
"""One of the secrets test stacks accept (``BILLING_STRIPE_WEBHOOK_SECRETS``)."""
ROTATED_SECRET = "whsec_tests_second"


def signature(payload: bytes, secret: str = TEST_SECRET, at: int | None = None) -> str:
    """``t=…,v1=…`` exactly as Stripe signs: HMAC-SHA256 of ``"<t>.<body>"``."""
    timestamp = int(time.time()) if at is None else at
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + payload, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def event(
    event_type: str, obj: dict[str, Any], event_id: str | None = None, created: int | None = None
) -> bytes:
    """A Stripe event's body around ``obj`` (its ``data.object``), ``created`` at Stripe's
    time (now by default; a test moving the emulator's clock passes the emulator's now)."""
    return json.dumps(
        {
            "id": event_id or f"evt_{uuid.uuid4().hex[:24]}",
            "object": "event",
            "api_version": "2026-10-28.endive",
            "created": int(time.time()) if created is None else created,
            "data": {"object": obj, "previous_attributes": {}},
            "livemode": False,
            "pending_webhooks": 1,
            "request": {"id": None, "idempotency_key": None},
            "type": event_type,
        }
    ).encode()
