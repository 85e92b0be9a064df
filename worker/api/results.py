"""How the API hears that a command it waits for has ended: one Redis connection per API
process, subscribed to the channel of every task's result (``PSUBSCRIBE``), waking the
requests that wait for those commands.

A connection of its own per waiting request would cost a TCP connection and its handshake
on every synchronous request; one pattern subscription costs a dictionary look-up per task
state published. What a waiting request reads is the command log, the source of truth: a
message only says when to read it. While Redis is unreachable the listener reconnects with
backoff, and the requests read the log every half second instead.

A subscription only reads, so a primary that stopped answering without closing its
connections (paused, partitioned away: a Sentinel failover's usual start) would leave it
waiting forever on a socket that never speaks, deaf to the new primary. It pings the server
every :data:`HEARTBEAT_SECONDS` of quiet, and a connection silent for
:data:`SILENCE_SECONDS` is given up and made again (through the sentinels: on the primary
they name now).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import Iterator, Mapping
from typing import Any

import redis.asyncio as aioredis
from celery.states import READY_STATES

from adapters.messaging.heartbeats import beat_async, forget_async
from adapters.messaging.publisher import RESULT_CHANNEL_PREFIX

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.5
"""How often a request reads the log while nothing listens."""
STARTUP_SECONDS = 2.0
"""How long the API's start waits for the subscription (Redis down: it starts polling)."""
MAX_BACKOFF_SECONDS = 5.0
HEARTBEAT_SECONDS = 1.0
"""Quiet on the subscription for this long: the listener pings the server."""
SILENCE_SECONDS = 3.0
"""No word from the server (not even the ping's answer) for this long: the connection is
dead; the listener makes another."""


class SilentServer(ConnectionError):
    """The subscription's server stopped answering."""


_ENDED = frozenset(READY_STATES)


class Watch:
    """One request's wait for its command's end."""

    def __init__(self, listener: ResultListener) -> None:
        self._listener = listener
        self._ended = asyncio.Event()

    def wake(self) -> None:
        self._ended.set()

    async def next_look(self, timeout: float) -> None:
        """Return when the command's task reports an end, or ``timeout`` passed: the moment to
        read the log again. Polls (half a second) while nothing listens."""
        if not self._listener.listening:
            await asyncio.sleep(min(POLL_SECONDS, timeout))
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ended.wait(), timeout)
        self._ended.clear()


class ResultListener:
    """The API process's one subscription to every task's result channel. With
    ``heartbeat_seconds``, it records its heartbeat (``adapters/messaging/heartbeats.py``) that
    often while it listens: a listener deaf for good goes silent."""

    def __init__(self, redis: aioredis.Redis, heartbeat_seconds: float = 0.0) -> None:
        self._redis = redis
        self._watches: dict[str, set[Watch]] = {}
        self._subscribed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._heartbeat_seconds = heartbeat_seconds
        self.loop_name = f"result-listener:{socket.gethostname()}:{os.getpid()}"

    @property
    def listening(self) -> bool:
        return self._subscribed.is_set()

    async def start(self) -> None:
        """Subscribe (in a task of its own), waiting at most :data:`STARTUP_SECONDS`."""
        self._task = asyncio.create_task(self._run(), name="result-listener")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._subscribed.wait(), STARTUP_SECONDS)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._heartbeat_seconds:
            with contextlib.suppress(Exception):  # Redis away: forgotten after a day
                await forget_async(self._redis, self.loop_name)

    async def _beat(self) -> None:
        try:
            await beat_async(self._redis, self.loop_name, self._heartbeat_seconds)
        except Exception as error:  # the silence shows it
            logger.info("could not record the result listener's heartbeat (%s)", error)

    @contextlib.contextmanager
    def watching(self, command_id: str) -> Iterator[Watch]:
        """A :class:`Watch` of ``command_id`` for the block's time. Entered before the
        command is published, so that its end cannot come unheard."""
        watch = Watch(self)
        self._watches.setdefault(command_id, set()).add(watch)
        try:
            yield watch
        finally:
            watches = self._watches.get(command_id)
            if watches is not None:
                watches.discard(watch)
                if not watches:
                    del self._watches[command_id]

    async def _run(self) -> None:
        backoff = 0.1
        while True:
            try:
                async with self._redis.pubsub() as pubsub:
                    await pubsub.psubscribe(RESULT_CHANNEL_PREFIX + "*")
                    await self._listen(pubsub)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                logger.warning("not listening for results (%s); requests poll the log", error)
            if self._subscribed.is_set():
                backoff = 0.1  # it was listening: subscribe again at once
            self._subscribed.clear()
            for watches in list(self._watches.values()):
                for watch in list(watches):
                    watch.wake()  # each reads the log, then polls
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    async def _listen(self, pubsub: Any) -> None:
        """Hand out what the subscription hears; raise :class:`SilentServer` once the server
        said nothing for :data:`SILENCE_SECONDS` (pinged after :data:`HEARTBEAT_SECONDS`)."""
        loop = asyncio.get_running_loop()
        prefix = RESULT_CHANNEL_PREFIX.encode()
        heard = pinged = loop.time()
        beaten = float("-inf")
        while True:
            message = await pubsub.get_message(timeout=HEARTBEAT_SECONDS)
            now = loop.time()
            every = self._heartbeat_seconds
            if every and self.listening and now - beaten >= every:
                beaten = now
                await self._beat()
            if message is not None:
                heard = now
                if message["type"] == "psubscribe":
                    if not self._subscribed.is_set():
                        logger.info("listening for results")
                    self._subscribed.set()
                elif message["type"] == "pmessage":
                    self._dispatch(message, prefix)
            if now - heard >= SILENCE_SECONDS:
                raise SilentServer(f"the server said nothing for {now - heard:.1f} s")
            if now - heard >= HEARTBEAT_SECONDS and now - pinged >= HEARTBEAT_SECONDS:
                await pubsub.ping()
                pinged = now

    def _dispatch(self, message: Mapping[str, Any], prefix: bytes) -> None:
        channel = message.get("channel")
        if not isinstance(channel, bytes) or not channel.startswith(prefix):
            return
        watches = self._watches.get(channel[len(prefix) :].decode(errors="replace"))
        if watches and reports_an_end(message):
            for watch in list(watches):
                watch.wake()


def reports_an_end(message: Mapping[str, Any]) -> bool:
    """Whether a message of a task's result channel reports that the task ended (a success or
    a failure), not that it started or waits for a retry; one that cannot be read counts as
    an end (the log is read then)."""
    data = message.get("data")
    if not isinstance(data, bytes):
        return True
    try:
        status = json.loads(data).get("status")
    except (ValueError, AttributeError):
        return True
    return not isinstance(status, str) or status in _ENDED
