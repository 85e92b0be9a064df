"""The console's protection against cross-site request forgery, and against a confirmed
action taken twice.

A browser sends the console's Basic credentials with every request to the API's origin,
also with a form another site makes it post: a credential alone proves nothing about who
wrote the form. So each action's form carries a token that only a page of the console can
hold, and the POST is taken only with it:

- the token is ``<expiry>.<nonce>.<signature>``: an HMAC-SHA256, under a server secret, of
  the client id, the action, its target, the expiry (Unix seconds) and a random nonce. It is
  bound to the client, the action and what it acts on (a token of the confirmation page of
  ``replay-command`` on ``cmd_a`` is refused for ``cmd_b``, or for ``retry-command``) and
  expires (``TOKEN_LIFETIME_SECONDS``); issuing one needs no storage;
- it is taken once: :meth:`CsrfTokens.redeem` records its nonce as used (Redis's
  ``SET NX EX``, shared by every API process) until the token would have expired anyway, and
  refuses a nonce used before, so a confirmed form posted again (a resubmission, a replayed
  capture) changes nothing twice. Where the record cannot be made, the action is refused
  (:class:`UseUncheckable`): the console fails closed;
- the request's ``Origin`` (else its ``Referer``), when the browser sends one, must be the
  API's own origin: a second, independent check that the POST came from one of its pages.
  A request naming neither is judged by its token alone (some privacy settings strip both).

The secret is ``BILLING_CONSOLE_CSRF_SECRET`` when set, else one kept in Redis (made once,
shared by every API process on that Redis): see :func:`console_secret`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

TOKEN_LIFETIME_SECONDS = 3600
"""How long a confirmation page's form may be posted (an operator reads, then confirms)."""
USED_RECORD_SLACK_SECONDS = 60
"""How much longer a used token's record outlives the token: API processes' clocks that
disagree by less than this still see it used until it has expired for all of them."""
FIELD = "csrf_token"
"""The form field the token travels in."""
USED_KEY_PREFIX = "billing:console:csrf-used:"
"""Redis keys recording used tokens, by nonce (each expires with its token)."""
_PURPOSE = b"billing-worker console action"
_TOKEN = re.compile(r"([0-9]{1,12})\.([0-9a-f]{32})\.([0-9a-f]{64})")

FirstUse = Callable[[str, int], bool]
"""``first_use(key, ttl_seconds)``: record ``key`` as used for ``ttl_seconds``; ``True`` if
it was not recorded already (Redis: ``SET key 1 NX EX ttl``). Raises if it cannot tell."""


class Forbidden(Exception):
    """A POST refused as possibly forged or replayed: why, in one line an operator can act on."""


class UseUncheckable(Exception):
    """A token that cannot be checked for an earlier use now (the shared record of used
    tokens does not answer): the action is refused rather than risked twice."""


@dataclass(frozen=True)
class CsrfTokens:
    """Issues and redeems the console's tokens under ``secret`` (``now``: Unix seconds)."""

    secret: bytes
    lifetime_seconds: int = TOKEN_LIFETIME_SECONDS
    now: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        if len(self.secret) < 16:
            raise ValueError("the console's CSRF secret must be at least 16 bytes")

    def issue(self, client_id: str, action: str, target: str) -> str:
        """A token for ``client_id`` to take ``action`` on ``target`` once, within
        :attr:`lifetime_seconds`."""
        expiry = int(self.now()) + self.lifetime_seconds
        nonce = secrets.token_hex(16)
        return f"{expiry}.{nonce}.{self._signature(client_id, action, target, expiry, nonce)}"

    def check(self, client_id: str, action: str, target: str, token: str | None) -> None:
        """Return if ``token`` was issued to ``client_id`` for ``action`` on ``target`` and
        has not expired, else raise :class:`Forbidden`. Whether it was used before is
        :meth:`redeem`'s question."""
        self._verified(client_id, action, target, token)

    def redeem(
        self, client_id: str, action: str, target: str, token: str | None, first_use: FirstUse
    ) -> None:
        """Take ``token`` for ``client_id``'s ``action`` on ``target``, once: as
        :meth:`check`, then record it used through ``first_use`` until it would have expired
        anyway. A token used before is :class:`Forbidden`; one whose use cannot be recorded
        (``first_use`` raised) is :class:`UseUncheckable`."""
        expiry, nonce = self._verified(client_id, action, target, token)
        keep_for = max(1, expiry - int(self.now())) + USED_RECORD_SLACK_SECONDS
        try:
            first = first_use(USED_KEY_PREFIX + nonce, keep_for)
        except Exception as error:
            raise UseUncheckable(
                "the console cannot check that this confirmation was not used before (its"
                f" record of used tokens does not answer: {type(error).__name__}); try again"
                " once it is back"
            ) from error
        if not first:
            raise Forbidden(
                "the form's CSRF token was used already: an action is taken once per"
                " confirmation (open the action's page again to take it again)"
            )

    def _verified(
        self, client_id: str, action: str, target: str, token: str | None
    ) -> tuple[int, str]:
        """``token``'s expiry and nonce, once its signature and expiry are checked."""
        if not token:
            raise Forbidden("the form carries no CSRF token: open the action's page and confirm")
        parsed = _TOKEN.fullmatch(token)
        if parsed is None:
            raise Forbidden("the form's CSRF token is malformed")
        expiry_text, nonce, signature = parsed.groups()
        expiry = int(expiry_text)
        expected = self._signature(client_id, action, target, expiry, nonce)
        if not hmac.compare_digest(signature, expected):
            raise Forbidden(
                "the form's CSRF token is not valid for this client, this action and this"
                " target: open the action's own page and confirm there"
            )
        if expiry <= self.now():
            raise Forbidden(
                "the form's CSRF token has expired: open the action's page again and confirm"
            )
        return expiry, nonce

    def _signature(self, client_id: str, action: str, target: str, expiry: int, nonce: str) -> str:
        # Every part is length-prefixed: no choice of ids can make two tuples sign alike.
        parts = (_PURPOSE, *(p.encode() for p in (client_id, action, target, str(expiry), nonce)))
        message = b"".join(len(part).to_bytes(4, "big") + part for part in parts)
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
