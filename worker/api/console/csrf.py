"""The console's protection against cross-site request forgery.

A browser sends the console's Basic credentials with every request to the API's origin,
also with a form another site makes it post: a credential alone proves nothing about who
wrote the form. So each action's form carries a token that only a page of the console can
hold, and the POST is taken only with it:

- the token is ``<expiry>.<signature>``: an HMAC-SHA256, under a server secret, of the client
  id and the expiry (Unix seconds). It is bound to the client (another client's token is
  refused), expires (``TOKEN_LIFETIME_SECONDS``) and needs no storage, so it works the same on
  every API process that shares the secret;
- the request's ``Origin`` (else its ``Referer``), when the browser sends one, must be the
  API's own origin: a second, independent check that the POST came from one of its pages.
  A request naming neither is judged by its token alone (some privacy settings strip both).

The secret is ``BILLING_CONSOLE_CSRF_SECRET`` when set, else one kept in Redis (made once,
shared by every API process on that Redis): see :func:`console_secret`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

TOKEN_LIFETIME_SECONDS = 3600
"""How long a confirmation page's form may be posted (an operator reads, then confirms)."""
FIELD = "csrf_token"
"""The form field the token travels in."""
_PURPOSE = b"billing-worker console action"


class Forbidden(Exception):
    """A POST refused as possibly forged: why, in one line an operator can act on."""


@dataclass(frozen=True)
class CsrfTokens:
    """Issues and checks the console's tokens under ``secret`` (``now``: Unix seconds)."""

    secret: bytes
    lifetime_seconds: int = TOKEN_LIFETIME_SECONDS
    now: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        if len(self.secret) < 16:
            raise ValueError("the console's CSRF secret must be at least 16 bytes")

    def issue(self, client_id: str) -> str:
        """A token for ``client_id``'s next action, valid for :attr:`lifetime_seconds`."""
        expiry = int(self.now()) + self.lifetime_seconds
        return f"{expiry}.{self._signature(client_id, expiry)}"

    def check(self, client_id: str, token: str | None) -> None:
        """Return if ``token`` is ``client_id``'s and not expired, else raise :class:`Forbidden`."""
        if not token:
            raise Forbidden("the form carries no CSRF token: open the action's page and confirm")
        expiry_text, dot, signature = token.partition(".")
        if not dot or not expiry_text.isdigit() or len(expiry_text) > 12:
            raise Forbidden("the form's CSRF token is malformed")
        expiry = int(expiry_text)
        if not hmac.compare_digest(signature, self._signature(client_id, expiry)):
            raise Forbidden("the form's CSRF token is not valid for this client")
        if expiry <= self.now():
            raise Forbidden(
                "the form's CSRF token has expired: open the action's page again and confirm"
            )

    def _signature(self, client_id: str, expiry: int) -> str:
        message = b"\x00".join((_PURPOSE, client_id.encode(), str(expiry).encode()))
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()


def check_origin(headers: Mapping[str, str], host: str | None) -> None:
    """Raise :class:`Forbidden` when the request's ``Origin`` (else ``Referer``) names another
    host than ``host``, the request's ``Host`` (the API as the browser addressed it). The
    scheme is not compared: behind a proxy ending TLS the API sees http for the browser's
    https. ``headers`` are the request's (looked up by lower-case name)."""
    origin = headers.get("origin")
    named_by = "Origin"
    if origin is None:
        origin = headers.get("referer")
        named_by = "Referer"
    if origin is None:
        return
    if origin == "null":
        raise Forbidden(f"the request's {named_by} is opaque: it was not sent by a console page")
    if not host:
        raise Forbidden("the request names no Host: its origin cannot be checked")
    try:
        theirs, ours = urlsplit(origin), urlsplit(f"//{host}")
        default = DEFAULT_PORTS.get(theirs.scheme)
        same = (
            bool(theirs.hostname)
            and theirs.hostname == ours.hostname
            and (theirs.port or default) == (ours.port or default)
        )
    except ValueError:
        raise Forbidden(f"the request's {named_by} is not a URL") from None
    if not same:
        raise Forbidden(
            f"the request comes from another site ({named_by} {theirs.scheme}://{theirs.netloc}):"
            " an action is taken only from the console's own pages"
        )


DEFAULT_PORTS = {"http": 80, "https": 443}

REDIS_KEY = "billing:console:csrf-secret"


def console_secret(configured: str | None, read_or_make: Callable[[str, bytes], bytes]) -> bytes:
    """The secret the tokens are signed with: ``configured`` when set, else the one
    ``read_or_make(key, candidate)`` keeps (Redis's ``SET NX`` then ``GET``: the first API
    process's candidate wins, so every process signs alike and tokens survive a restart)."""
    if configured:
        return configured.encode()
    return read_or_make(REDIS_KEY, secrets.token_hex(32).encode())
