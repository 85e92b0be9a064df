"""A test that times out or fails leaves no process behind it: a pytest session of its own, in
a subprocess, starts a stack-like process tree (a parent in a session of its own that starts
a child in another) and then hangs or fails; once that session ends, both are gone."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.processes import SESSION_MARK_ENV, marked_processes
from tests.support.stack import eventually
from worker.local.embedded import ProcessGroup, start_redis

REPOSITORY = Path(__file__).resolve().parents[2]

CONFTEST = """
from tests.conftest import nothing_outlives_the_session  # noqa: F401 - the guard under test
"""

# What `billing-worker up` does: a process in a session of its own, starting its servers each
# in a session of their own (worker/local/embedded.py's ProcessGroup), then waiting.
STACK_LIKE = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from worker.local.embedded import ProcessGroup
    group = ProcessGroup()
    sleeper = "import time\\nwhile True: time.sleep(1)"
    server = group.start("server", [sys.executable, "-c", sleeper])
    Path(sys.argv[1]).write_text(str(server.pid))
    while True:
        time.sleep(1)
    """
)

TESTS = """
import os, sys, time
from pathlib import Path
from worker.local.embedded import ProcessGroup

STACK_LIKE = {stack_like!r}

def test_that_hangs_with_a_stack_running():
    group = ProcessGroup()
    up = group.start("up", [sys.executable, "-c", STACK_LIKE, os.environ["SERVER_PID_FILE"]])
    Path(os.environ["UP_PID_FILE"]).write_text(str(up.pid))
    while not Path(os.environ["SERVER_PID_FILE"]).exists():
        time.sleep(0.05)
    {end}
"""

ENDS = {
    # pytest-timeout's thread method ends the process with os._exit: no finalizer runs.
    "timeout-thread": ("while True: time.sleep(1)", ["--timeout=5", "--timeout-method=thread"]),
    # Its signal method fails the test; the test itself never stops what it started.
    "timeout-signal": ("while True: time.sleep(1)", ["--timeout=5", "--timeout-method=signal"]),
    "failure": ("assert False, 'the test failed'", []),
}


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.parametrize("end", list(ENDS))
def test_a_test_that_times_out_or_fails_leaves_no_process_it_started(
    tmp_path: Path, end: str
) -> None:
    body, options = ENDS[end]
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_hangs.py").write_text(TESTS.format(stack_like=STACK_LIKE, end=body))
    up_pid_file, server_pid_file = tmp_path / "up.pid", tmp_path / "server.pid"
    environment = {
        **os.environ,
        "PYTHONPATH": str(REPOSITORY),
        "UP_PID_FILE": str(up_pid_file),
        "SERVER_PID_FILE": str(server_pid_file),
    }
    run = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:valkey"),
            *("-n", "0", "--rootdir", str(tmp_path), "-c", os.devnull, *options),
            str(tmp_path / "test_hangs.py"),
        ],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    pids = [int(up_pid_file.read_text()), int(server_pid_file.read_text())]
    try:
        assert run.returncode != 0, run.stdout
        eventually(lambda: not any(_running(pid) for pid in pids), 30, "the processes to end")
        if end != "timeout-thread":  # there the process ends before it can report anything
            assert "processes started by the tests were left running" in run.stdout
            assert STACK_LIKE.splitlines()[1] in run.stdout, run.stdout  # up's command line
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_redis_server_a_test_starts_is_found_by_the_session_s_mark(tmp_path: Path) -> None:
    """The session finds what its tests left by the mark in each process's environment; the
    Redis-protocol server left alone writes its process title over its environment."""
    mark = os.environ[SESSION_MARK_ENV]
    group = ProcessGroup()
    try:
        start_redis(group, tmp_path / "redis", log_path=tmp_path / "redis.log")
        server = group.children[0].process.pid
        found = {process.pid for process in marked_processes(mark)}
    finally:
        group.stop()

    assert server in found
