"""API clients (spec section 5): client id and a slow-KDF (argon2id) hash of the secret.

``ClientAuthenticator`` is the adapter of ``domain.ports.clients.ClientVerifier``: the API
reaches the stored clients through that port only."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from adapters.db.models import ApiClientRow
from adapters.observability import metrics
from domain.errors import found
from domain.permissions import Grant, parse_scopes
from domain.ports.application import Clock

logger = logging.getLogger(__name__)

_hasher = PasswordHasher()


@dataclass(frozen=True)
class NewClient:
    client_id: str
    secret: str
    name: str
    grant: Grant = field(default_factory=Grant)


@dataclass(frozen=True)
class ClientView:
    """A client as operators see it: never its secret, nor the secret's hash."""

    client_id: str
    name: str
    enabled: bool
    grant: Grant
    created_at: datetime
    updated_at: datetime | None

    def to_view(self) -> dict[str, Any]:
        return {
            "client_id": self.client_id,
            "name": self.name,
            "enabled": self.enabled,
            "scopes": sorted(self.grant.scopes),
            "org_ids": None if self.grant.org_ids is None else sorted(self.grant.org_ids),
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
        }


def _grant_of(row: ApiClientRow) -> Grant:
    return Grant(
        scopes=parse_scopes(row.scopes or []),
        org_ids=None if row.org_ids is None else frozenset(row.org_ids),
    )


def _view_of(row: ApiClientRow) -> ClientView:
    return ClientView(row.id, row.name, row.enabled, _grant_of(row), row.created_at, row.updated_at)


def _store_grant(row: ApiClientRow, grant: Grant) -> None:
    row.scopes = sorted(grant.scopes)
    row.org_ids = None if grant.org_ids is None else sorted(grant.org_ids)


def create_client(
    sessions: sessionmaker[Session],
    clock: Clock,
    name: str,
    *,
    grant: Grant | None = None,
    client_id: str | None = None,
    secret: str | None = None,
) -> NewClient:
    """Store a client; the secret is returned here once and only its hash is kept. Without a
    ``grant``, the client holds the default scopes (:data:`domain.permissions.DEFAULT_SCOPES`)
    in every organization."""
    client_id = client_id or f"cli_{secrets.token_hex(8)}"
    secret = secret or secrets.token_urlsafe(32)
    grant = grant or Grant()
    with sessions.begin() as session:
        row = ApiClientRow(
            id=client_id,
            name=name,
            secret_hash=_hasher.hash(secret),
            enabled=True,
            created_at=clock.now(),
        )
        _store_grant(row, grant)
        session.add(row)
    return NewClient(client_id=client_id, secret=secret, name=name, grant=grant)


def list_clients(sessions: sessionmaker[Session]) -> list[ClientView]:
    with sessions() as session:
        rows = session.scalars(select(ApiClientRow).order_by(ApiClientRow.created_at)).all()
        return [_view_of(row) for row in rows]


def get_client(sessions: sessionmaker[Session], client_id: str) -> ClientView:
    """A client as operators see it, or ``NotFound``."""
    with sessions() as session:
        row = found(session.get(ApiClientRow, client_id), "client", client_id)
        return _view_of(row)


def _change_client(
    sessions: sessionmaker[Session],
    clock: Clock,
    client_id: str,
    change: Callable[[ApiClientRow], None],
) -> ClientView:
    with sessions.begin() as session:
        row = found(session.get(ApiClientRow, client_id, with_for_update=True), "client", client_id)
        change(row)
        row.updated_at = clock.now()
        return _view_of(row)


def update_client(
    sessions: sessionmaker[Session],
    clock: Clock,
    client_id: str,
    *,
    name: str | None = None,
    grant: Grant | None = None,
    enabled: bool | None = None,
) -> ClientView:
    """Rename a client, replace its grant, or enable or disable it. API processes apply the
    change once their cached verification of the client ends (``BILLING_AUTH_CACHE_SECONDS``)."""

    def change(row: ApiClientRow) -> None:
        if name is not None:
            row.name = name
        if grant is not None:
            _store_grant(row, grant)
        if enabled is not None:
            row.enabled = enabled

    return _change_client(sessions, clock, client_id, change)


def rotate_secret(sessions: sessionmaker[Session], clock: Clock, client_id: str) -> NewClient:
    """Give a client a new secret (returned once); the old one stops working."""
    secret = secrets.token_urlsafe(32)
    secret_hash = _hasher.hash(secret)

    def change(row: ApiClientRow) -> None:
        row.secret_hash = secret_hash

    view = _change_client(sessions, clock, client_id, change)
    return NewClient(client_id=client_id, secret=secret, name=view.name, grant=view.grant)


def secret_authenticates(sessions: sessionmaker[Session], client_id: str, secret: str) -> bool:
    """Whether ``secret`` is the client's current secret (enabled or not): for ``up``, which
    prints the demo client's secret and must know it still works."""
    with sessions() as session:
        row = session.get(ApiClientRow, client_id)
        stored = row.secret_hash if row is not None else None
    if stored is None:
        return False
    try:
        return bool(_hasher.verify(stored, secret))
    except (VerificationError, InvalidHashError):
        return False


def _yield_cpu() -> None:
    """Put the calling thread in Linux's ``SCHED_IDLE`` class (argon2's own lane threads
    inherit it): any other thread of the machine that wakes up, such as the event loop with
    a verified client's request, takes the core at once instead of waiting for a slow hash.
    Hashes still progress, slowly, on a fully loaded machine. Elsewhere, the thread keeps
    its priority."""
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(threading.get_native_id(), os.SCHED_IDLE, os.sched_param(0))


@dataclass(frozen=True)
class _Verified:
    grant: Grant
    refresh_at: float
    expires_at: float


class ClientAuthenticator:
    """Verifies Basic credentials against stored clients.

    A successful argon2 verification is remembered for ``ttl`` seconds, keyed by an HMAC of
    the credentials under a per-process random key (the secret itself is never kept), so the
    slow hash is not paid on every request: :meth:`cached` answers those without a thread.
    Failures are never cached. Slow verifications run in a pool of ``max_concurrent_hashes``
    threads of their own, at a lower CPU priority than the rest of the process, so a flood
    of wrong secrets cannot take the cores from clients already verified.

    Refreshed ahead: a cached verification used once half its ``ttl`` has passed is verified
    again in the background (against the database, so a disabled client or a rotated secret
    is seen), by one thread at normal priority that a flood of wrong secrets cannot hold
    up; an active client never finds its verification expired, and one that fails the
    refresh is forgotten at once.
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        ttl: float,
        max_entries: int = 10_000,
        max_concurrent_hashes: int = 2,
    ):
        self._sessions = sessions
        self._ttl = ttl
        self._max_entries = max_entries
        self._key = os.urandom(32)
        self._verified: dict[bytes, _Verified] = {}
        self._refreshing: dict[bytes, Future[Grant | None]] = {}
        self._lock = threading.Lock()
        self.max_concurrent_hashes = max_concurrent_hashes
        self._hashing = ThreadPoolExecutor(
            max_concurrent_hashes, thread_name_prefix="verify-secret", initializer=_yield_cpu
        )
        self._refreshes = ThreadPoolExecutor(1, thread_name_prefix="refresh-verification")
        self._decoy_hash = _hasher.hash(secrets.token_urlsafe(16))

    def fingerprint(self, client_id: str, secret: str) -> bytes:
        """What identifies these credentials in this process (an HMAC; never the secret)."""
        return hmac.new(self._key, f"{client_id}\x00{secret}".encode(), hashlib.sha256).digest()

    def cached(self, client_id: str, secret: str) -> Grant | None:
        """The client's grant if these credentials were verified within the last ``ttl``
        seconds, else ``None``. Past half the ``ttl``, starts their refresh (once)."""
        fingerprint = self.fingerprint(client_id, secret)
        now = time.monotonic()
        with self._lock:
            entry = self._verified.get(fingerprint)
            if entry is None or entry.expires_at <= now:
                return None
            refresh: Future[Grant | None] | None = None
            if entry.refresh_at <= now and fingerprint not in self._refreshing:
                refresh = self._refreshing[fingerprint] = Future()
        if refresh is not None:
            try:
                self._refreshes.submit(self._refresh, fingerprint, client_id, secret, refresh)
            except RuntimeError:  # shutting down: nobody must wait for a refresh never run
                with self._lock:
                    self._refreshing.pop(fingerprint, None)
                refresh.set_result(None)
        return entry.grant

    def refreshing(self, client_id: str, secret: str) -> Future[Grant | None] | None:
        """The refresh under way of these credentials' verification, if one is."""
        fingerprint = self.fingerprint(client_id, secret)
        with self._lock:
            return self._refreshing.get(fingerprint)

    def verify(self, client_id: str, secret: str) -> Grant | None:
        """The grant of the client these credentials belong to, or ``None`` if they are
        wrong, unknown, or the client is disabled."""
        if grant := self.cached(client_id, secret):
            return grant
        return self._hashing.submit(self._verify_slowly, client_id, secret).result()

    async def verify_async(self, client_id: str, secret: str) -> Grant | None:
        """:meth:`verify` for the event loop: it waits for the hashing pool without a thread.
        The API schedules these calls (:class:`worker.api.verifications.Verifications`)."""
        if grant := self.cached(client_id, secret):
            return grant
        future = self._hashing.submit(self._verify_slowly, client_id, secret)
        return await asyncio.wrap_future(future)

    def _refresh(
        self, fingerprint: bytes, client_id: str, secret: str, done: Future[Grant | None]
    ) -> None:
        grant: Grant | None = None
        try:
            grant = self._verify_slowly(client_id, secret, reason="refresh")
            if grant is None:
                with self._lock:
                    self._verified.pop(fingerprint, None)
        except Exception:
            # The database is unreachable, say: the verification stays trusted until it
            # expires, and the next request past its refresh point tries again.
            logger.warning("could not refresh a client's verification", exc_info=True)
        finally:
            with self._lock:
                self._refreshing.pop(fingerprint, None)
            done.set_result(grant)  # the requests waiting for it (past its end) go on

    def _verify_slowly(self, client_id: str, secret: str, reason: str = "request") -> Grant | None:
        fingerprint = self.fingerprint(client_id, secret)
        now = time.monotonic()
        try:
            with self._sessions() as session:
                row = session.get(ApiClientRow, client_id)
                live = row if row is not None and row.enabled else None
                stored = live.secret_hash if live is not None else None
                grant = _grant_of(live) if live is not None else None
        except Exception:
            metrics.CLIENT_VERIFICATIONS.labels(reason, "error").inc()
            raise
        try:
            # An unknown client costs the same as a wrong secret: ids can't be probed by time.
            _hasher.verify(stored or self._decoy_hash, secret)
        except (VerificationError, InvalidHashError):
            grant = None
        metrics.CLIENT_VERIFICATIONS.labels(reason, "valid" if grant else "invalid").inc()
        if grant is None:
            return None

        with self._lock:
            if len(self._verified) >= self._max_entries:
                self._verified.clear()
            self._verified[fingerprint] = _Verified(grant, now + self._ttl / 2, now + self._ttl)
        return grant
