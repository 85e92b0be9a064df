"""The port of API client authentication (spec section 5): what the API asks of the stored
clients, as a Protocol. The adapter is ``adapters/db/api_clients.py`` (``ClientAuthenticator``),
handed to the API by the composition root (``worker.bootstrap``)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol

from domain.permissions import Grant


class ClientVerifier(Protocol):
    """Verifies a client's Basic credentials against the stored clients: a slow hash
    (argon2id), so a verification that succeeded is remembered for a while and answered
    without one (:meth:`cached`)."""

    @property
    def max_concurrent_hashes(self) -> int:
        """How many slow verifications run at once (the API queues the rest)."""
        ...

    def fingerprint(self, client_id: str, secret: str) -> bytes:
        """What identifies these credentials in this process (never the secret itself)."""
        ...

    def cached(self, client_id: str, secret: str) -> Grant | None:
        """The client's grant if these credentials were verified lately, else ``None``;
        never hashes, never waits."""
        ...

    def refreshing(self, client_id: str, secret: str) -> Future[Grant | None] | None:
        """The refresh under way of these credentials' verification (begun ahead of its end
        by :meth:`cached`), if one is: its result is the grant, or ``None`` if they are no
        longer valid. Never waits."""
        ...

    async def verify_async(self, client_id: str, secret: str) -> Grant | None:
        """The grant of the client these credentials belong to, or ``None`` if they are
        wrong, unknown, or the client is disabled. Raises if the clients cannot be read
        (the database is unreachable): that is not a wrong secret."""
        ...
