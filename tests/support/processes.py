"""Nothing a test session starts outlives it.

Every process the session starts, directly or through ``billing-worker up``, a
:class:`~worker.local.embedded.ProcessGroup`, ``pg_ctl`` or a worker's pool, inherits the
session's mark: the environment variable :data:`SESSION_MARK_ENV`, set once in the test
process before anything starts. Children started in a session of their own
(``start_new_session``) leave pytest's process group, but not their environment, so the mark
finds them wherever they went.

Two guards use it:

- at the end of the session (:func:`leftover_guard`, torn down after every other session
  fixture) every marked process still running after a grace period is killed, and the session
  fails with its command line;
- a reaper process (:func:`start_reaper`), started before any test, waits for the test process
  to end however it ends (``pytest-timeout``'s thread method calls ``os._exit``, a ``kill -9``
  skips every finalizer) and then kills whatever still carries the mark.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

SESSION_MARK_ENV = "TESTS_STARTED_BY_SESSION"
"""The variable marking a process as started by one test session (not ``BILLING_*``: the
tests strip those from their children's environment)."""

LEFTOVER_GRACE_SECONDS = 10.0
"""How long the end of a session waits for marked processes to exit on their own (a killed
worker's pool notices its parent is gone) before it kills them."""

_PROC = Path("/proc")


@dataclass(frozen=True)
class MarkedProcess:
    pid: int
    command_line: str


def new_session_mark() -> str:
    """Mark this process, and so every process it starts from now on, as started by a new
    session; returns the mark."""
    mark = f"{os.getpid()}-{uuid.uuid4().hex}"
    os.environ[SESSION_MARK_ENV] = mark
    return mark


def marked_processes(mark: str, *, exclude: Iterable[int] = ()) -> list[MarkedProcess]:
    """The running processes (zombies excluded) whose environment carries ``mark``."""
    needle = f"{SESSION_MARK_ENV}={mark}".encode() + b"\0"
    skipped = {os.getpid(), *exclude}
    found: list[MarkedProcess] = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) in skipped:
            continue
        try:
            environment = (entry / "environ").read_bytes() + b"\0"
            if needle not in environment or _is_zombie(entry):
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or another user's
            continue
        command_line = " ".join(part.decode(errors="replace") for part in argv if part)
        found.append(MarkedProcess(int(entry.name), command_line))
    return found


def _is_zombie(entry: Path) -> bool:
    status = (entry / "stat").read_text()
    return status.rsplit(")", 1)[-1].split()[0] in ("Z", "X")


def kill_all(processes: Iterable[MarkedProcess], grace: float = 5.0) -> None:
    """SIGTERM each process (and its process group when it leads one), SIGKILL what is left
    after ``grace`` seconds."""
    processes = list(processes)
    for process in processes:
        _signal(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(p.pid) for p in processes):
        time.sleep(0.05)
    for process in processes:
        if _alive(process.pid):
            _signal(process.pid, signal.SIGKILL)


def _signal(pid: int, number: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, number)
        else:
            os.kill(pid, number)


def _alive(pid: int) -> bool:
    try:
        return not _is_zombie(_PROC / str(pid))
    except OSError:
        return False


def leftovers(mark: str, *, exclude: Iterable[int] = (), grace: float) -> list[MarkedProcess]:
    """The marked processes still running once ``grace`` seconds passed without all of them
    exiting."""
    excluded = tuple(exclude)
    deadline = time.monotonic() + grace
    while (found := marked_processes(mark, exclude=excluded)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def start_reaper(mark: str) -> subprocess.Popen[bytes]:
    """A process that waits for this one to end (its stdin, a pipe only this process holds,
    reaches end of file) and then kills every process carrying ``mark``. Its own environment
    has no mark."""
    environment = {k: v for k, v in os.environ.items() if k != SESSION_MARK_ENV}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.processes", mark],
        stdin=subprocess.PIPE,
        env=environment,
        cwd=Path(__file__).resolve().parents[2],
        start_new_session=True,  # Ctrl-C on the run must not stop it before it reaps
    )


@contextlib.contextmanager
def leftover_guard(grace: float = LEFTOVER_GRACE_SECONDS) -> Iterator[str]:
    """Mark the session, start its reaper; at the end kill what the session left and raise
    ``AssertionError`` naming it."""
    mark = new_session_mark()
    reaper = start_reaper(mark)
    try:
        yield mark
    finally:
        left = leftovers(mark, exclude=(reaper.pid,), grace=grace)
        kill_all(left)
        if reaper.stdin:
            reaper.stdin.close()
        reaper.wait(30)
        if left:
            lines = "\n".join(f"  pid {p.pid}: {p.command_line}" for p in left)
            raise AssertionError(f"processes started by the tests were left running:\n{lines}")


def _reap(mark: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.stdin.buffer.read()  # returns once every holder of the pipe's other end is gone
    kill_all(marked_processes(mark))


@contextlib.contextmanager
def python_until_stdin_closes(
    code: str, *arguments: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Iterator[str]:
    """Run ``code`` in a Python process of its own (it holds a lock, say, then reads its
    standard input); yield the first line it prints, and end it by closing its input when the
    block ends."""
    process = subprocess.Popen(
        [sys.executable, "-c", code, *arguments],
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdin is not None
    try:
        yield process.stdout.readline()
    finally:
        process.stdin.close()
        process.wait(30)


if __name__ == "__main__":
    _reap(sys.argv[1])
