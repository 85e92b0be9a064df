"""The relay a worker process runs for its commands, in a thread of its own, coalesced.

A command that finished asks for the outbox to be relayed (``Application.relay_soon``) and
returns at once: its events are committed with its change, so nothing waits on them. The
thread relays right away when it was idle; while commands keep finishing it relays at most
once every ``min_interval`` seconds, so that one relay (one lock, one read, one stream append,
one mark) carries the events of every command that finished meanwhile. Beat's relay sweep
stays the safety net for a process that dies with a request pending.

The processes of one worker node share their relays (:class:`NodeRelays`, made by the node's
main process before its pool forks): a node relays at most once every ``min_interval``,
however many processes it has (one process takes each slot; the others wait for the next),
and a process whose requests all came before a relay of another process of the node began
leaves its events to that relay, which read them. Without the shared slot, each process kept
its own interval: the node relayed once per interval per process, and the processes' relays
met on the Redis lock (one attempt in two found it taken, a round trip for nothing).
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from typing import Protocol

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 5.0
"""How long a process that stops waits for the relay it asked for."""


class BackgroundRelay(Protocol):
    """What runs a process's relays in its background (:meth:`Services.relay_soon
    <worker.bootstrap.Services.relay_soon>`): production's is :class:`CoalescingRelay`."""

    def request(self, relay: Callable[[], bool]) -> None: ...

    def flush(self) -> None:
        """Run what was asked for before the process exits."""
        ...


class NodeRelays:
    """What this node's processes share of their relays, in shared memory that a forked pool
    inherits (``CLOCK_MONOTONIC``: one clock for every process of the machine): when the
    latest relay that ran to its end began (writes race only towards an earlier time than
    the latest, which costs a process one relay more, never one less), and when the latest
    relay slot was taken (:meth:`take_slot`)."""

    def __init__(self) -> None:
        self._began = multiprocessing.RawValue(ctypes.c_double, float("-inf"))
        # Its lock is held for a comparison and a write, never across a relay: a process
        # killed while holding it is all but impossible, and would only cost the others the
        # node's shared slot (they then relay on their own interval, as before).
        self._slot = multiprocessing.Value(ctypes.c_double, float("-inf"))

    def take_slot(self, now: float, interval: float) -> float:
        """Take the node's relay slot if none was taken within ``interval`` before ``now``:
        ``0.0``; otherwise how long until the next one. One process of the node relays per
        interval; the others wait for the next slot, by which time a relay that began
        after they asked has most often read their events (:meth:`covered`)."""
        if not self._slot.get_lock().acquire(timeout=1.0):
            return 0.0
        try:
            due = self._slot.value + interval
            if now < due:
                return due - now
            self._slot.value = now
            return 0.0
        finally:
            self._slot.get_lock().release()

    def ran(self, began: float) -> None:
        """A relay that began at ``began`` read the outbox and published what it found."""
        if began > self._began.value:
            self._began.value = began

    def covered(self, since: float) -> bool:
        """A relay that began after ``since`` ran to its end: it read every event committed
        before ``since``."""
        return bool(self._began.value > since)


_node_relays: NodeRelays | None = None


def share_relays_across_the_node() -> None:
    """Called by a worker node's main process before its pool forks: its processes share
    their relays (:class:`NodeRelays`)."""
    global _node_relays  # one per node, inherited by the forked pool
    _node_relays = NodeRelays()


def node_relays() -> NodeRelays | None:
    """This node's shared relays; ``None`` outside a worker node (each process on its own)."""
    return _node_relays


class CoalescingRelay:
    """Runs ``relay`` in a daemon thread of this process, soon after :meth:`request`.

    Requests made while a run waits or runs are served by that run or the next one: a
    request is never lost (the flag is cleared before the run reads the outbox). The thread
    starts on the first request in each process (never before a fork)."""

    def __init__(self, min_interval: float, node: NodeRelays | None = None) -> None:
        self._min_interval = min_interval
        self._node = node
        self._pending = threading.Lock()
        self._pending_since: float | None = None
        """When the oldest request not yet served was made."""
        self._wanted = threading.Event()
        self._stopping = threading.Event()
        self._start = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._relay: Callable[[], bool] | None = None

    def request(self, relay: Callable[[], bool]) -> None:
        """Have ``relay`` run soon (coalesced with every other request of this process). A
        relay that returns ``False`` (another relay held the lock) is asked for again: it
        runs once more after the pause."""
        self._relay = relay
        self._ensure_thread()
        self._asked_since(time.monotonic())
        self._wanted.set()

    def _asked_since(self, since: float) -> None:
        with self._pending:
            if self._pending_since is None or since < self._pending_since:
                self._pending_since = since

    def flush(self, timeout: float = FLUSH_SECONDS) -> None:
        """Run what was asked for, then stop the thread (a process about to exit)."""
        thread = self._thread
        if thread is None or self._pid != os.getpid() or not thread.is_alive():
            return
        self._stopping.set()
        self._wanted.set()
        thread.join(timeout)

    def _ensure_thread(self) -> None:
        thread, pid = self._thread, os.getpid()
        if thread is not None and self._pid == pid and thread.is_alive():
            return
        with self._start:
            if self._thread is not None and self._pid == pid and self._thread.is_alive():
                return
            # A forked child inherits the parent's object, not its thread: start its own.
            self._wanted = threading.Event()
            self._stopping = threading.Event()
            self._pending = threading.Lock()
            self._pid = pid
            self._thread = threading.Thread(target=self._run, name="event-relay", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        last_run = float("-inf")
        while True:
            self._wanted.wait()
            # Commands that finish during this pause ride along with this run; a process
            # that stops cuts it short.
            pause = last_run + self._min_interval - time.monotonic()
            if pause > 0:
                self._stopping.wait(pause)
            self._wait_for_the_node_s_slot()
            self._wanted.clear()
            with self._pending:
                since, self._pending_since = self._pending_since, None
            relay = self._relay
            # Another process of the node began a relay after every request waiting here:
            # it read their events (committed before they asked).
            covered = self._node is not None and since is not None and self._node.covered(since)
            if relay is not None and since is not None and not covered:
                last_run = time.monotonic()
                try:
                    if relay():
                        if self._node is not None:
                            self._node.ran(last_run)
                    else:
                        self._asked_since(since)
                        self._wanted.set()
                except Exception:  # beat's sweep relays what is left
                    logger.warning("could not relay events now; beat's sweep will", exc_info=True)
            if self._stopping.is_set():
                return

    def _wait_for_the_node_s_slot(self) -> None:
        """Until this process takes its node's relay slot, or another process's relay,
        begun since this process asked, serves its requests (or the process stops)."""
        node = self._node
        if node is None:
            return
        while not self._stopping.is_set():
            with self._pending:
                since = self._pending_since
            if since is None or node.covered(since):
                return
            wait = node.take_slot(time.monotonic(), self._min_interval)
            if wait <= 0:
                return
            self._stopping.wait(wait)
