"""Ranges of ports for test sessions that run side by side on one machine.

Every server a test starts listens on a port :func:`worker.local.embedded.free_port` picked
and that nothing binds until the server does. A port the kernel offers (``bind`` to 0) is
one of its ephemeral ports, which any process's outgoing connection may take meanwhile, and
two sessions picking in the same range pick the same ports: two suites at once on one
machine (two clones, each with two pytest processes) then start a Flower, a Redis or an API
on a port the other just took ("Address already in use").

So each pytest process holds one slot of :data:`SLOTS` for as long as it runs: an exclusive
``flock`` on a file of its own, which the kernel lets go of when the process ends, however it
ends. A slot is a range of 2,000 ports below the kernel's ephemeral ones; the process's
servers, and the processes it starts (they inherit ``FREE_PORT_RANGE``), pick theirs in it.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path
from typing import IO

from worker.local.embedded import FREE_PORT_LEDGER_ENV, FREE_PORT_RANGE_ENV

FIRST_PORT = 20_000
PORTS_PER_SLOT = 2_000
SLOTS = 6
"""20,000 to 31,999: below Linux's ephemeral ports (32,768 and up), three suites of two."""

LOCK_DIRECTORY = Path(tempfile.gettempdir()) / "billing-worker-test-port-slots"

_held: list[IO[str]] = []


def claim_port_range(lock_directory: Path = LOCK_DIRECTORY) -> str | None:
    """Hold a free slot for this process and set ``FREE_PORT_RANGE`` to its range; return
    the range. A process started with ``FREE_PORT_RANGE`` set keeps it (a session started by
    a test shares its parent's range). ``None`` when every slot is held: the kernel's
    ephemeral ports are used then, as before slots."""
    given = os.environ.get(FREE_PORT_RANGE_ENV)
    if given:
        return given
    lock_directory.mkdir(exist_ok=True)
    for slot in range(SLOTS):
        handle = (lock_directory / f"slot-{slot}.lock").open("w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        _held.append(handle)  # open for the process's life: closing it gives the slot back
        first = FIRST_PORT + PORTS_PER_SLOT * slot
        chosen = f"{first}-{first + PORTS_PER_SLOT - 1}"
        os.environ[FREE_PORT_RANGE_ENV] = chosen
        # The ports handed out in the range, shared with every process this one starts; a
        # new holder of the slot starts it afresh.
        ledger = lock_directory / f"slot-{slot}.ports"
        ledger.write_text("")
        os.environ[FREE_PORT_LEDGER_ENV] = str(ledger)
        return chosen
    return None
