"""One stack per data directory: ``up`` holds an exclusive lock on ``DATA_DIR/up.lock``.

The lock is an OS file lock (``flock``), not a port check: it is taken before ``up`` starts or
wipes anything, held for ``up``'s life and inherited by every process ``up`` starts, and the
kernel releases it when the last of them exits, however they end (Ctrl-C, SIGTERM, kill -9,
a crash). So a second ``up`` on the same directory, whatever its ports, is refused while any
process of the first runs; and the CLI asks the lock, not ``stack.json``'s ``stopped`` flag,
whether the stack runs (a ``stack.json`` can be stale, the lock cannot).

The file also says who holds it (``up``'s pid and its API's URL), for the refusal's line.
Standard library only: :mod:`worker.local.stack_state` reads it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCK_FILE = "up.lock"


class StackAlreadyRunning(SystemExit):
    """A second ``up`` on a data directory whose stack runs: exits with one line naming it."""


@dataclass(frozen=True)
class StackLock:
    """The lock ``up`` holds: its open file descriptor (inheritable, for the children)."""

    fd: int
    path: Path

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def hold(data_dir: Path, holder: dict[str, Any]) -> StackLock:
    """Take the data directory's lock for this process (and the children it starts with the
    descriptor passed on), recording ``holder``; raise :class:`StackAlreadyRunning` when a
    running stack holds it."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = data_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StackAlreadyRunning(refusal(data_dir)) from None
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps(holder, sort_keys=True).encode())
    os.set_inheritable(fd, True)
    return StackLock(fd, path)


def is_held(data_dir: Path) -> bool | None:
    """Whether a stack runs on ``data_dir`` by its lock; ``None`` when there is no lock file
    (no ``up`` of this version ever ran there)."""
    try:
        fd = os.open(data_dir / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the shared lock, if it was taken
    return False


def holder(data_dir: Path) -> dict[str, Any]:
    """What the holder recorded (``pid``, ``api_url``), or ``{}``."""
    try:
        loaded = json.loads((data_dir / LOCK_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def refusal(data_dir: Path) -> str:
    """The one line a second ``up`` exits with."""
    where = data_dir.resolve()
    recorded = holder(data_dir)
    pid, api_url = recorded.get("pid"), recorded.get("api_url")
    stack = f"API {api_url}, `up` pid {pid}" if api_url else f"`up` pid {pid}"
    if isinstance(pid, int) and not _alive(pid):
        return (
            f"a stack is already running on {where} ({stack}, gone; processes it started "
            f"still run: `fuser -v {where / LOCK_FILE}` lists them): stop them first, or give "
            "another --data-dir"
        )
    return (
        f"a stack is already running on {where} ({stack}): stop it (Ctrl-C where it runs) "
        "first, or give another --data-dir"
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
