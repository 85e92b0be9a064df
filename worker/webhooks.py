"""Webhook deliveries over HTTP, signed as the Standard Webhooks specification says.

Each request carries ``webhook-id`` (the event's id: the same on every retry and replay, so
that receivers deduplicate by it), ``webhook-timestamp`` (Unix seconds) and
``webhook-signature`` (``v1,<base64 HMAC-SHA256>`` of ``id.timestamp.body``, one per secret,
space separated: during a rotation both the new and the old secret sign).
"""

from __future__ import annotations

import email.utils
from collections.abc import Sequence
from datetime import UTC, datetime

import httpx
from standardwebhooks import Webhook

from domain.ports import WebhookResponse

USER_AGENT = "billing-worker-webhooks/1"


def signature_header(
    message_id: str, timestamp: datetime, body: str, secrets: Sequence[str]
) -> str:
    """The ``webhook-signature`` value: one ``v1,`` signature per secret."""
    return " ".join(
        Webhook(secret).sign(msg_id=message_id, timestamp=timestamp, data=body)
        for secret in secrets
    )


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """A ``Retry-After`` header as seconds: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


class HttpWebhookSender:
    """Posts events with httpx: one short-lived request each, redirects not followed (a
    receiver answers where it was registered)."""

    def send(
        self,
        url: str,
        *,
        message_id: str,
        body: bytes,
        secrets: Sequence[str],
        timeout_seconds: float,
    ) -> WebhookResponse:
        now = datetime.now(UTC)
        text = body.decode()
        headers = {
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "webhook-id": message_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signature_header(message_id, now, text, secrets),
        }
        try:
            response = httpx.post(
                url, content=body, headers=headers, timeout=timeout_seconds, follow_redirects=False
            )
        except httpx.TimeoutException:
            return WebhookResponse(status=None, error=f"no answer within {timeout_seconds:g}s")
        except httpx.HTTPError as error:
            return WebhookResponse(status=None, error=f"{type(error).__name__}: {error}"[:500])
        if 200 <= response.status_code < 300:
            return WebhookResponse(status=response.status_code)
        text = response.text[:200].strip()
        return WebhookResponse(
            status=response.status_code,
            retry_after=retry_after_seconds(response.headers.get("retry-after"), now),
            error=f"HTTP {response.status_code}" + (f": {text}" if text else ""),
        )
