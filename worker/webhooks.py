"""Webhook deliveries over HTTP, signed as the Standard Webhooks specification says.

Each request carries ``webhook-id`` (the event's id: the same on every retry and replay, so
that receivers deduplicate by it), ``webhook-timestamp`` (Unix seconds) and
``webhook-signature`` (``v1,<base64 HMAC-SHA256>`` of ``id.timestamp.body``, one per secret,
space separated: during a rotation both the new and the old secret sign).
"""

from __future__ import annotations

import email.utils
import socket
from collections.abc import Sequence
from datetime import UTC, datetime
from urllib.parse import urlsplit

import httpx
from standardwebhooks import Webhook

from domain.event_ports import WebhookResponse
from domain.webhooks import is_private_host

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
    receiver answers where it was registered).

    Unless ``allow_private_networks``, a URL whose host resolves to an address that is not
    public (loopback, private, link-local such as a cloud's metadata service…) is not
    requested: whoever may add endpoints must not reach inside the network through us. The
    check is made at each attempt, on what the name resolves to then; a name that resolves
    differently between the check and the connection (DNS rebinding within a second) is not
    covered, nor are proxies (``trust_env`` is off)."""

    def __init__(self, *, allow_private_networks: bool = False) -> None:
        self._allow_private_networks = allow_private_networks

    def send(
        self,
        url: str,
        *,
        message_id: str,
        body: bytes,
        secrets: Sequence[str],
        timeout_seconds: float,
    ) -> WebhookResponse:
        refusal = None if self._allow_private_networks else _private_target(url)
        if refusal is not None:
            return WebhookResponse(status=None, error=refusal)
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
                url,
                content=body,
                headers=headers,
                timeout=timeout_seconds,
                follow_redirects=False,
                trust_env=False,
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


def _private_target(url: str) -> str | None:
    """Why ``url`` may not be requested (its host is not public), or ``None``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if is_private_host(host):
        return f"refused: {host} is not a public address (BILLING_WEBHOOK_ALLOW_PRIVATE_NETWORKS)"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
    except OSError as error:
        return f"cannot resolve {host}: {error}"
    private = sorted(address for address in resolved if is_private_host(str(address)))
    if private:
        return (
            f"refused: {host} resolves to {private[0]}, not a public address "
            "(BILLING_WEBHOOK_ALLOW_PRIVATE_NETWORKS)"
        )
    return None
