"""``billing-worker up`` started as a new user starts it, for the tests that try the README and
the tutorial: a process of its own on free ports, its stack file and demo client read back."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.support.environment import settings_environment
from tests.support.stack import eventually
from worker.local.embedded import free_port


def http_status(url: str) -> int:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.HTTPError:
        return 0


@contextmanager
def running_up(data_dir: Path, **env: str) -> Iterator[dict[str, Any]]:
    """``billing-worker up --data-dir DATA_DIR`` on free ports, ready; yields its stack file
    with ``process``, ``data_dir`` and the demo client's ``client_id`` and ``client_secret``.
    Stopped with SIGTERM afterwards, unless the test stopped it."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "worker.cli",
            "up",
            "--data-dir",  # after the command's name, where users put it
            str(data_dir),
            "--api-port",
            str(free_port()),
            "--flower-port",
            str(free_port()),
        ],
        env=settings_environment(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        stack_file = data_dir / "stack.json"
        eventually(lambda: stack_file.exists(), 60, "stack.json")
        stack: dict[str, Any] = json.loads(stack_file.read_text())
        eventually(lambda: http_status(f"{stack['api_url']}/readyz") == 200, 60, "readiness")
        credentials = json.loads((data_dir / "demo-client.json").read_text())
        yield {**stack, "process": process, "data_dir": data_dir, **credentials}
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait(30)
