"""Webhook deliveries over HTTP, signed as the Standard Webhooks specification says.

Each request carries ``webhook-id`` (the event's id: the same on every retry and replay, so
that receivers deduplicate by it), ``webhook-timestamp`` (Unix seconds) and
``webhook-signature`` (``v1,<base64 HMAC-SHA256>`` of ``id.timestamp.body``, one per secret,
space separated: during a rotation both the new and the old secret sign).
"""

from __future__ import annotations

import contextlib
import email.utils
import socket
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from urllib.parse import urlsplit

import httpx
from standardwebhooks import Webhook

from domain.ports.events import WebhookResponse
from domain.redaction import mask_text
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
    if value.isascii() and value.isdigit():
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
            return _post(url, body, headers, timeout_seconds)
        except httpx.TimeoutException:
            return WebhookResponse(status=None, error=f"no answer within {timeout_seconds:g}s")
        except httpx.HTTPError as error:
            return WebhookResponse(status=None, error=_shown(f"{type(error).__name__}: {error}"))


ANSWER_BYTES_READ = 1024
"""Of a receiver's answer, only this much is read (for the error shown to operators)."""


def _post(
    url: str, body: bytes, headers: dict[str, str], timeout_seconds: float
) -> WebhookResponse:
    """POST and read at most :data:`ANSWER_BYTES_READ` of the answer, within twice the
    timeout once the answer began (each read has the timeout of its own): a receiver that
    trickles its answer, or sends a huge one, costs a worker neither time nor memory."""
    deadline = time.monotonic() + 2 * timeout_seconds
    with httpx.stream(
        "POST",
        url,
        content=body,
        headers=headers,
        timeout=timeout_seconds,
        follow_redirects=False,
        trust_env=False,
    ) as response:
        status = response.status_code
        if 200 <= status < 300:
            return WebhookResponse(status=status)
        start = b""
        # The status is the answer; its body only says more, so a broken one changes nothing.
        with contextlib.suppress(httpx.HTTPError):
            for chunk in response.iter_raw():  # as it arrives (a size would wait to fill it)
                start += chunk
                if len(start) >= ANSWER_BYTES_READ or time.monotonic() > deadline:
                    break
        text = start[:200].decode("utf-8", "replace")
        return WebhookResponse(
            status=status,
            retry_after=retry_after_seconds(response.headers.get("retry-after"), datetime.now(UTC)),
            error=_shown(f"HTTP {status}: {text}" if text.strip() else f"HTTP {status}"),
        )


def _shown(text: str) -> str:
    """What a receiver said, as operators see it (``webhooks list``, ``deliveries``): one line
    of printable text (no terminal escapes, no forged lines), personal data masked."""
    line = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return mask_text(line)[:300]


def _private_target(url: str) -> str | None:
    """Why ``url`` may not be requested (its host is not public), or ``None``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if is_private_host(host):
        return f"refused: {host} is not a public address (BILLING_WEBHOOK_ALLOW_PRIVATE_NETWORKS)"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return f"refused: {url[:100]!r} has no valid port"
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
