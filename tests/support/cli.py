"""``billing-worker`` run as an operator runs it: a process of its own, with only the settings
given, nobody at its stdin."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.environment import settings_environment


@dataclass(frozen=True)
class Done:
    status: int
    stdout: str
    stderr: str


def billing_worker(*args: str, env: dict[str, str], cwd: Path | None = None) -> Done:
    """Run ``billing-worker ARGS`` in a process of its own, with only ``env`` as settings
    (and ``cwd`` as its working directory)."""
    done = subprocess.run(
        [sys.executable, "-m", "worker.cli", *args],
        env=settings_environment(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,  # nobody to answer a prompt, as in a script
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return Done(done.returncode, done.stdout, done.stderr)


def assert_refused_in_one_line(done: Done, *, status: int, says: str) -> None:
    """One line on stderr saying ``says``, exit ``status``, never a traceback."""
    assert "Traceback" not in done.stderr + done.stdout
    assert done.status == status, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert says in lines[0], lines[0]
