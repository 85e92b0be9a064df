"""API clients (spec section 5): client id and a slow-KDF (argon2id) hash of the secret."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import time
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy.orm import Session, sessionmaker

from domain.ports import Clock
from worker.db.models import ApiClientRow

_hasher = PasswordHasher()


@dataclass(frozen=True)
class NewClient:
    client_id: str
    secret: str
    name: str


def create_client(
    sessions: sessionmaker[Session],
    clock: Clock,
    name: str,
    *,
    client_id: str | None = None,
    secret: str | None = None,
) -> NewClient:
    """Store a client; the secret is returned here once and only its hash is kept."""
    client_id = client_id or f"cli_{secrets.token_hex(8)}"
    secret = secret or secrets.token_urlsafe(32)
    with sessions.begin() as session:
        session.add(
            ApiClientRow(
                id=client_id,
                name=name,
                secret_hash=_hasher.hash(secret),
                enabled=True,
                created_at=clock.now(),
            )
        )
    return NewClient(client_id=client_id, secret=secret, name=name)


class ClientAuthenticator:
    """Verifies Basic credentials against stored clients.

    A successful argon2 verification is remembered for ``ttl`` seconds, keyed by an HMAC of
    the credentials under a per-process random key (the secret itself is never kept), so the
    slow hash is not paid on every request. Failures are never cached.
    """

    def __init__(self, sessions: sessionmaker[Session], ttl: float, max_entries: int = 10_000):
        self._sessions = sessions
        self._ttl = ttl
        self._max_entries = max_entries
        self._key = os.urandom(32)
        self._verified: dict[bytes, float] = {}
        self._lock = threading.Lock()
        self._decoy_hash = _hasher.hash(secrets.token_urlsafe(16))

    def verify(self, client_id: str, secret: str) -> bool:
        fingerprint = hmac.new(
            self._key, f"{client_id}\x00{secret}".encode(), hashlib.sha256
        ).digest()
        now = time.monotonic()
        with self._lock:
            expires = self._verified.get(fingerprint)
        if expires is not None and expires > now:
            return True

        with self._sessions() as session:
            row = session.get(ApiClientRow, client_id)
            stored = row.secret_hash if row is not None and row.enabled else None
        try:
            # An unknown client costs the same as a wrong secret: ids can't be probed by time.
            _hasher.verify(stored or self._decoy_hash, secret)
        except (VerificationError, InvalidHashError):
            return False
        if stored is None:
            return False

        with self._lock:
            if len(self._verified) >= self._max_entries:
                self._verified.clear()
            self._verified[fingerprint] = now + self._ttl
        return True
