"""How the API schedules the slow verifications of client secrets (helpers of
:mod:`worker.api.auth`).

- **One verification in flight per client and secret**: requests bringing credentials that
  are being verified wait for that verification instead of starting their own, so a new
  client's burst costs one hash and all its requests get its answer.
- **Only attempts that failed count as failed.** So that guesses sent at once cannot overrun
  the limit while they are verified, an attempt in flight holds a place under its client
  id's and its source's limits until it ends: a further attempt waits for a place (it is
  refused once failures alone fill the limit).
- **Sources take turns**: hashes are handed out one source at a time, in turn, and to
  sources without a recent failure first, so a new client waits for the hashes under way,
  never behind a flood of wrong secrets from another source.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, OrderedDict, deque
from collections.abc import AsyncIterator
from functools import partial

from domain.permissions import Grant
from domain.ports.clients import ClientVerifier
from worker.api.throttle import FailureThrottle

TOO_MANY_FAILURES = "too many failed authentications"
TOO_MANY_IN_PROGRESS = "too many authentications in progress"


class Throttled(Exception):
    """An attempt refused before any hash; ``retry_after`` seconds until it may come again."""

    def __init__(self, retry_after: float, reason: str = TOO_MANY_FAILURES) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.reason = reason


class AttemptLimit:
    """One key space's limit (client ids, or source addresses): the failures in the
    throttle's window and the attempts in flight together stay within the throttle's limit."""

    def __init__(self, failures: FailureThrottle) -> None:
        self.failures = failures
        self._in_flight: Counter[str] = Counter()
        self._waiting: Counter[str] = Counter()
        self._settled: dict[str, asyncio.Event] = {}

    def full(self, key: str) -> bool:
        return self.failures.failures(key) + self._in_flight[key] >= self.failures.limit

    async def settled(self, key: str) -> None:
        """Wait until an attempt of ``key`` in flight ends. At most as many requests as the
        limit wait per key; beyond, :class:`Throttled`."""
        if self._waiting[key] >= self.failures.limit:
            raise Throttled(1.0, TOO_MANY_IN_PROGRESS)
        event = self._settled.setdefault(key, asyncio.Event())
        self._waiting[key] += 1
        try:
            await event.wait()
        finally:
            self._waiting[key] -= 1
            if self._waiting[key] <= 0:
                del self._waiting[key]

    def begin(self, key: str) -> None:
        self._in_flight[key] += 1

    def end(self, key: str, *, failed: bool) -> None:
        if failed:
            self.failures.failed(key)
        self._in_flight[key] -= 1
        if self._in_flight[key] <= 0:
            del self._in_flight[key]
        if (event := self._settled.pop(key, None)) is not None:
            event.set()


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
    """The API process's slow verifications: single-flight per credentials, limited per
    client id and per source, hashed by sources in turn. Lives in the event loop."""

    def __init__(
        self,
        authenticator: ClientVerifier,
        failures_by_client: FailureThrottle,
        failures_by_source: FailureThrottle,
    ) -> None:
        self._authenticator = authenticator
        self._by_client = AttemptLimit(failures_by_client)
        self._by_source = AttemptLimit(failures_by_source)
        self._turns = FairTurns(authenticator.max_concurrent_hashes)
        self._running: dict[bytes, asyncio.Task[Grant | None]] = {}

    async def verify(self, client_id: str, secret: str, source: str) -> Grant | None:
        """The grant of these credentials, or ``None`` if they are wrong; :class:`Throttled`
        if the client id or the source failed too often, before any hash."""
        fingerprint = self._authenticator.fingerprint(client_id, secret)
        limits = ((self._by_client, client_id), (self._by_source, source))
        while True:
            if (grant := self._authenticator.cached(client_id, secret)) is not None:
                return grant
            if (running := self._running.get(fingerprint)) is not None:
                return await asyncio.shield(running)
            waits = [wait for limit, key in limits if (wait := limit.failures.retry_after(key))]
            if waits:
                raise Throttled(max(waits))
            full = next(((limit, key) for limit, key in limits if limit.full(key)), None)
            if full is None:
                break
            await full[0].settled(full[1])
        for limit, key in limits:
            limit.begin(key)
        task = asyncio.create_task(self._verify(client_id, secret, source))
        self._running[fingerprint] = task
        task.add_done_callback(partial(self._settle, fingerprint, limits))
        return await asyncio.shield(task)

    async def _verify(self, client_id: str, secret: str, source: str) -> Grant | None:
        preferred = not self._by_source.failures.failures(source)
        async with self._turns.turn(source, preferred=preferred):
            return await self._authenticator.verify_async(client_id, secret)

    def _settle(
        self,
        fingerprint: bytes,
        limits: tuple[tuple[AttemptLimit, str], ...],
        task: asyncio.Task[Grant | None],
    ) -> None:
        self._running.pop(fingerprint, None)
        # Not a wrong secret when it could not be verified (the database is unreachable, say).
        failed = not task.cancelled() and task.exception() is None and task.result() is None
        for limit, key in limits:
            limit.end(key, failed=failed)
