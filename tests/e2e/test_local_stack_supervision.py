"""`billing-worker up` as a supervisor: a process of the stack that exits (here the worker,
killed) does not stop the others; `up` starts it again, says so with the count of restarts,
and the demo goes on working without a hand on it."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_local_stack_ha import command_status, enable_the_demo_user
from tests.e2e.test_local_stack_lifecycle import Up, start_up
from tests.support.stack import eventually

pytestmark = pytest.mark.e2e


@pytest.fixture
def up(tmp_path: Path) -> Iterator[tuple[Up, list[str]]]:
    """A running `up` and what it prints from now on (read by a thread of its own)."""
    started = start_up(tmp_path / "supervised")
    printed: list[str] = []

    def read() -> None:
        assert started.process.stdout is not None
        for line in started.process.stdout:
            printed.append(line.rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield started, printed
    finally:
        started.stop()


def child_pids(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in children]


def worker_pid(up: Up) -> int | None:
    """The worker node `up` runs now (its main process), if one runs."""
    for pid in child_pids(up.process.pid):
        try:
            command_line = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"worker" in command_line and any(b"celery" in part for part in command_line):
            return pid
        # Where setproctitle is installed, Celery renames its processes ("[celeryd: …").
        if command_line[0].startswith(b"[celeryd: "):
            return pid
    return None


def test_a_worker_that_exits_is_started_again_by_up_and_the_stack_goes_on(
    up: tuple[Up, list[str]],
) -> None:
    stack, printed = up
    killed = worker_pid(stack)
    assert killed is not None
    os.killpg(killed, signal.SIGKILL)  # the node and its pool, as an OOM kill would
    killed_at = time.monotonic()

    restarted = eventually(
        lambda: next((line for line in printed if line.startswith("worker started again")), None),
        timeout=30,
        what="up to start the worker again",
    )
    command = enable_the_demo_user(stack)
    eventually(lambda: command_status(stack, command) == "succeeded", 60, "the command to run")
    resumed = time.monotonic() - killed_at
    print(f"\nworker killed; a command sent after it ran {resumed:.1f} s after the kill")

    assert resumed < 30
    assert stack.process.poll() is None  # up still runs, and so does everything else
    [exited] = [line for line in printed if line.startswith("worker (pid")]
    assert f"worker (pid {killed}) exited with -9; starting it again in 1s" in exited
    assert "(restarts so far: 0)" in exited
    assert "restart 1)" in restarted
    assert worker_pid(stack) not in (None, killed)
