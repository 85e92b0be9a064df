"""Stripe's webhook signatures: a request to our webhook route is taken only if one of our
endpoints' secrets signed its raw body, recently (the SDK verifies; we add the bounds the SDK
leaves out)."""

from __future__ import annotations

import re
import time

import stripe

WEBHOOK_TOLERANCE_SECONDS = 300
"""Stripe's own default: a signature older (or newer) than this is refused (replays)."""
_UNIX_TIME = re.compile(r"[0-9]{1,12}")


class BadSignature(Exception):
    """A Stripe webhook request whose signature no secret verifies (or too old or too far
    in the future, or no signature at all). The message says which, without echoing the
    header."""


def verify_stripe_signature(
    payload: bytes,
    signature: str | None,
    secrets: list[str],
    *,
    tolerance: int = WEBHOOK_TOLERANCE_SECONDS,
    now: float | None = None,
) -> None:
    """Whether one of ``secrets`` signed ``payload`` within ``tolerance`` seconds of now,
    either way (several secrets: a rotation without downtime); :class:`BadSignature` if
    not. Verified by the SDK itself over the raw body, before anything is parsed; the SDK
    refuses only a signature too old, so one dated ahead of our clock by more than the
    tolerance (a replay prepared in advance, or a clock gone wrong) is refused here."""
    if not signature:
        raise BadSignature("no Stripe-Signature header")
    if not secrets:
        raise BadSignature("no Stripe webhook secret is configured")
    # Every ``t`` (the SDK reads the last one): a readable Unix time, none in the future.
    stamps = [
        value.strip()
        for name, _, value in (item.partition("=") for item in signature.split(","))
        if name.strip() == "t"
    ]
    if not stamps or not all(_UNIX_TIME.fullmatch(stamp) for stamp in stamps):
        raise BadSignature("the Stripe-Signature has no readable timestamp")
    if max(map(int, stamps)) > (time.time() if now is None else now) + tolerance:
        raise BadSignature("the Stripe-Signature's timestamp is in the future")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        raise BadSignature("the body is not UTF-8") from None
    for secret in secrets:
        try:
            stripe.WebhookSignature.verify_header(text, signature, secret, tolerance)
        except stripe.SignatureVerificationError:
            continue
        return
    raise BadSignature("no configured secret verifies the Stripe-Signature (or it is too old)")
