"""How the API schedules the slow verifications of client secrets (helpers of
:mod:`worker.api.auth`).

- **One attempt in flight per client and secret**: requests bringing credentials that are
  being verified (or waiting for their places) join that attempt instead of starting their
  own, so a new client's burst costs one place, one hash, and all its requests get its
  answer; credentials whose verification is being refreshed ahead of its end wait for the
  refresh, without asking Redis: a busy client is never refused for its own requests.
- **Counted per source, and per client id from that source; never per client id alone**, so
  that nobody's guesses refuse a client its right secret from another source (what stops a
  guesser spread over many addresses is the secrets' entropy and the cost of each hash:
  ``docs/explanation/security.md``).
- **Only attempts that failed count as failed.** So that guesses sent at once cannot overrun
  the limit while they are verified, an attempt in flight holds a place under its (source,
  client id)'s and its source's limits until it ends: a further attempt waits for a place (it is
  refused once failures alone fill the limit). Failures and places are counted in Redis,
  for every API process at once (:mod:`worker.api.shared_throttle`); single-flight is per
  process (a new client's burst spread over N processes costs at most N hashes).
- **Sources take turns**: hashes are handed out one source at a time, in turn, and to
  sources without a recent failure first, so a new client waits for the hashes under way,
  never behind a flood of wrong secrets from another source.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter, OrderedDict, deque
from collections.abc import AsyncIterator
from functools import partial

from domain.permissions import Grant
from domain.ports.clients import ClientVerifier
from worker.api.shared_throttle import SharedFailures, end, take

TOO_MANY_FAILURES = "too many failed authentications"
TOO_MANY_IN_PROGRESS = "too many authentications in progress"


def source_and_client(source: str, client_id: str) -> str:
    """The key of a client id's failures from one source (a line break never appears in an
    address, nor in a header value)."""
    return f"{source}\n{client_id}"


class Throttled(Exception):
    """An attempt refused before any hash; ``retry_after`` seconds until it may come again."""

    def __init__(self, retry_after: float, reason: str = TOO_MANY_FAILURES) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.reason = reason


class AttemptWaits:
    """The requests of this process waiting for a place under a key's limit, and what wakes
    them: an attempt of this process ending, or a short poll for those of the others."""

    POLL_SECONDS = 0.1

    def __init__(self) -> None:
        self._waiting: Counter[tuple[str, str]] = Counter()
        self._ended = asyncio.Event()

    async def settled(self, failures: SharedFailures, key: str) -> None:
        """Wait until an attempt may have ended. At most as many requests as the limit wait
        per key in this process; beyond, :class:`Throttled`."""
        waiting = (failures.space, key)
        if self._waiting[waiting] >= failures.limit:
            raise Throttled(1.0, TOO_MANY_IN_PROGRESS)
        self._waiting[waiting] += 1
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ended.wait(), self.POLL_SECONDS)
        finally:
            self._waiting[waiting] -= 1
            if self._waiting[waiting] <= 0:
                del self._waiting[waiting]

    def ended(self) -> None:
        self._ended.set()
        self._ended = asyncio.Event()


class FairTurns:
    """At most ``slots`` holders at once. Waiting requests are served one source at a time,
    in turn (round robin), so many waiting requests of one source delay another source's
    first by one turn, not by all of theirs; and sources without a recent failure before
    the others, so a new client waits for the hashes under way, not for a flood's turns."""

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._preferred: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()
        self._others: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()

    @contextlib.asynccontextmanager
    async def turn(self, source: str, *, preferred: bool = False) -> AsyncIterator[None]:
        await self._acquire(source, self._preferred if preferred else self._others)
        try:
            yield
        finally:
            self._release()

    async def _acquire(
        self, source: str, queues: OrderedDict[str, deque[asyncio.Future[None]]]
    ) -> None:
        if self._free > 0 and not self._preferred and not self._others:
            self._free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queues.setdefault(source, deque()).append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # handed the slot as it was cancelled: pass it on
            else:
                self._forget(queues, source, waiter)
            raise

    def _release(self) -> None:
        for queues in (self._preferred, self._others):
            while queues:
                source, waiters = next(iter(queues.items()))
                waiter = waiters.popleft()
                if waiters:
                    queues.move_to_end(source)
                else:
                    del queues[source]
                if not waiter.done():
                    waiter.set_result(None)  # the slot passes on: _free is unchanged
                    return
        self._free += 1

    @staticmethod
    def _forget(
        queues: OrderedDict[str, deque[asyncio.Future[None]]],
        source: str,
        waiter: asyncio.Future[None],
    ) -> None:
        waiters = queues.get(source)
        if waiters is None:
            return
        with contextlib.suppress(ValueError):
            waiters.remove(waiter)
        if not waiters:
            del queues[source]


class Verifications:
    """The API process's slow verifications: single-flight per credentials in this process,
    limited per (source, client id) and per source across every process (in Redis:
    :mod:`worker.api.shared_throttle`), hashed by sources in turn. Lives in the event loop.

    The first request of some credentials starts their *attempt* (places under the limits,
    then the hash) before it waits for anything, so that every other request bringing them
    joins it: a client's burst asks Redis for one place, never for one per request, and is
    never refused for attempts of its own in flight. Credentials whose verification is being
    refreshed ahead of its end wait for that refresh instead, without asking Redis at all."""

    def __init__(
        self,
        authenticator: ClientVerifier,
        failures_by_source_and_client: SharedFailures,
        failures_by_source: SharedFailures,
    ) -> None:
        self._authenticator = authenticator
        self._by_source_and_client = failures_by_source_and_client
        self._by_source = failures_by_source
        self._waits = AttemptWaits()
        self._turns = FairTurns(authenticator.max_concurrent_hashes)
        self._attempts: dict[bytes, asyncio.Task[Grant | None]] = {}
        self._ending: set[asyncio.Task[None]] = set()

    async def verify(self, client_id: str, secret: str, source: str) -> Grant | None:
        """The grant of these credentials, or ``None`` if they are wrong; :class:`Throttled`
        if the source failed too often, or too often for this client id, before any hash."""
        fingerprint = self._authenticator.fingerprint(client_id, secret)
        if (grant := self._authenticator.cached(client_id, secret)) is not None:
            return grant
        if (refresh := self._authenticator.refreshing(client_id, secret)) is not None:
            # Verified lately and being verified again: its answer is the one to wait for, and
            # a verification just made (not what the cache holds when this request wakes).
            # A refresh that fails or errs gives no grant: then an attempt of its own.
            with contextlib.suppress(Exception):
                if (grant := await asyncio.shield(asyncio.wrap_future(refresh))) is not None:
                    return grant
        attempt = self._attempts.get(fingerprint)
        if attempt is None:
            # Registered before anything is awaited: the requests that follow join it.
            attempt = asyncio.create_task(self._attempt(client_id, secret, source))
            self._attempts[fingerprint] = attempt
            attempt.add_done_callback(partial(self._forget, fingerprint))
        return await asyncio.shield(attempt)

    async def _attempt(self, client_id: str, secret: str, source: str) -> Grant | None:
        # Never per client id alone: a stranger's guesses would then lock the client out.
        limits = (
            (self._by_source_and_client, source_and_client(source, client_id)),
            (self._by_source, source),
        )
        token = uuid.uuid4().hex
        while True:
            try:
                taken = await take(limits, token)
            except asyncio.CancelledError:
                self._end_later(limits, token, failed=False)  # its places may have been taken
                raise
            if taken.retry_after is not None:
                raise Throttled(taken.retry_after)
            if taken.taken:
                break
            full, key = limits[taken.full - 1]
            await self._waits.settled(full, key)
        try:
            grant = await self._verify(client_id, secret, source, taken.failures[1])
        except BaseException:
            # Not a wrong secret when it could not be verified (the database is unreachable).
            self._end_later(limits, token, failed=False)
            raise
        self._end_later(limits, token, failed=grant is None)
        return grant

    async def _verify(
        self, client_id: str, secret: str, source: str, source_failures: int
    ) -> Grant | None:
        async with self._turns.turn(source, preferred=not source_failures):
            return await self._authenticator.verify_async(client_id, secret)

    def _forget(self, fingerprint: bytes, attempt: asyncio.Task[Grant | None]) -> None:
        if self._attempts.get(fingerprint) is attempt:
            del self._attempts[fingerprint]
        if not attempt.cancelled():
            attempt.exception()  # retrieved: its requests may all have gone

    def _end_later(
        self, limits: tuple[tuple[SharedFailures, str], ...], token: str, *, failed: bool
    ) -> None:
        ending = asyncio.get_running_loop().create_task(self._end(limits, token, failed=failed))
        self._ending.add(ending)  # a reference until it is done: the loop keeps weak ones
        ending.add_done_callback(self._ending.discard)

    async def _end(
        self, limits: tuple[tuple[SharedFailures, str], ...], token: str, *, failed: bool
    ) -> None:
        try:
            await end(limits, token, failed=failed)
        finally:
            self._waits.ended()
