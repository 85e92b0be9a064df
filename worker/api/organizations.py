"""The organizations a command sent over HTTP may name: those that exist.

A command naming an organization that does not exist is refused before it is recorded or
counted in the client's share (``client_share.py``): ``404`` with the spec's error body, the
same body the handlers give for it (``NotFound.resource("organization", …)``). Otherwise
made-up ids would each open a fresh share per organization, and every one of them would
cost a row in the command log and a worker's time to reject.

Whether the client may act for the organization is decided before this, from the request
alone (``auth.permitted``: a client limited to organizations gets a ``403`` for any other,
whether it exists or not). So a ``404`` tells only a client that may act for every
organization that an id is not one of them.

The API is on the synchronous round trip's path, so the answer is kept: an organization
found is remembered in this process for a few minutes (organizations are not removed while
the service runs; should one be, the handler still refuses the command, recorded), and
answered without the database. An id not found is never remembered (it may be created the
next moment, and made-up ids must not fill the memory); each costs one primary-key read,
and one client's reads of ids not remembered run at most ``LOOKUPS_PER_CLIENT`` at a time in
this process, so a flood of made-up ids waits in its own line and never holds the threads
every other client's commands are recorded on.

Past ``FREE_REFUSALS_PER_MINUTE`` a client's refusals are held before they are sent (the
API's refusal hold, ``BILLING_AUTH_THROTTLED_HOLD_SECONDS``, as for too many failed
authentications): a client flooding made-up ids then spends its time waiting, one refusal a
second per connection, instead of asking again at once and taking the API's CPU from every
other client, while a caller's occasional typo is answered at once. Counted per process (the
client is authenticated, so their number is bounded).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from anyio import to_thread

from domain.errors import NotFound
from domain.ports.repositories import OrganizationDirectory
from worker.api.errors import ApiError

REMEMBER_SECONDS = 300.0
"""How long an organization found is answered from memory."""
REMEMBERED_AT_MOST = 10_000
"""How many organizations found one process remembers (the least recently found go first)."""
LOOKUPS_PER_CLIENT = 2
"""Reads of organizations not remembered one client may have in flight in one process."""
FREE_REFUSALS_PER_MINUTE = 10
"""Refusals one client gets at once in a minute, in one process; later ones are held."""


class KnownOrganizations:
    """Refuses a command naming an organization that does not exist (:meth:`check`)."""

    def __init__(
        self,
        directory: OrganizationDirectory,
        *,
        remember_seconds: float = REMEMBER_SECONDS,
        capacity: int = REMEMBERED_AT_MOST,
        clock: Callable[[], float] = time.monotonic,
        hold_refusal: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._directory = directory
        self._hold_refusal = hold_refusal
        self._remember_seconds = remember_seconds
        self._capacity = capacity
        self._clock = clock
        self._found: OrderedDict[str, float] = OrderedDict()
        """Organization id → when it stops being answered from memory."""
        self._lookups: dict[str, tuple[asyncio.Semaphore, int]] = {}
        """Client id → its reads' turns, and how many of its requests hold or wait for one."""
        self._refusals: dict[str, tuple[float, int]] = {}
        """Client id → when its minute of refusals started, and how many it had in it."""

    async def check(self, client_id: str, org_id: str) -> None:
        """Return if ``org_id`` exists, else raise the ``404`` (``NOT_FOUND``) naming it."""
        if self._remembered(org_id):
            return
        async with self._turn(client_id):
            exists = await to_thread.run_sync(self._directory.exists, org_id)
        if not exists:
            if self._refused_often(client_id) and self._hold_refusal is not None:
                await self._hold_refusal()
            raise ApiError.of(NotFound.resource("organization", org_id))
        self._remember(org_id)

    def _refused_often(self, client_id: str) -> bool:
        """Count a refusal of ``client_id``'s; whether it is past its free ones this minute."""
        now = self._clock()
        started, count = self._refusals.get(client_id, (now, 0))
        if now - started >= 60.0:
            started, count = now, 0
        self._refusals[client_id] = (started, count + 1)
        return count >= FREE_REFUSALS_PER_MINUTE

    def _remembered(self, org_id: str) -> bool:
        until = self._found.get(org_id)
        if until is None:
            return False
        if until <= self._clock():
            del self._found[org_id]
            return False
        return True

    def _remember(self, org_id: str) -> None:
        self._found[org_id] = self._clock() + self._remember_seconds
        self._found.move_to_end(org_id)
        while len(self._found) > self._capacity:
            self._found.popitem(last=False)

    def _turn(self, client_id: str) -> _Turn:
        return _Turn(self._lookups, client_id)


class _Turn:
    """One of a client's ``LOOKUPS_PER_CLIENT`` turns to read, waited for in line; the
    client's line is dropped once no request of it holds or waits for a turn."""

    def __init__(self, lines: dict[str, tuple[asyncio.Semaphore, int]], client_id: str) -> None:
        self._lines = lines
        self._client_id = client_id

    async def __aenter__(self) -> None:
        semaphore, users = self._lines.get(
            self._client_id, (asyncio.Semaphore(LOOKUPS_PER_CLIENT), 0)
        )
        self._lines[self._client_id] = (semaphore, users + 1)
        try:
            await semaphore.acquire()
        except BaseException:
            self._leave()
            raise

    async def __aexit__(self, *_exc: object) -> None:
        self._lines[self._client_id][0].release()
        self._leave()

    def _leave(self) -> None:
        semaphore, users = self._lines[self._client_id]
        if users <= 1:
            del self._lines[self._client_id]
        else:
            self._lines[self._client_id] = (semaphore, users - 1)
