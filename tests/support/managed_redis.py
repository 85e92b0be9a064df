"""A managed Redis as ElastiCache, Memorystore or Azure run one, on this machine: a primary and
a replica behind one stable address (:class:`~tests.support.forwarder.Forwarder`, the DNS
name), which fails over by promoting the replica, moving the name and turning the old primary
into a replica in place (:meth:`ManagedRedis.flip`), or restarts its primary with an empty
dataset (:meth:`ManagedRedis.restart_empty`). Nothing is written to disk: a restart is empty.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import redis

from tests.support.forwarder import Forwarder
from worker.local.embedded import ProcessGroup, free_port, redis_server_binary, wait_until
from worker.local.sentinel import answers_ping, replicating


class ManagedRedis:
    """Start with :meth:`start`, stop with :meth:`stop`; clients use :attr:`url` only."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.password = secrets.token_urlsafe(12)
        self.ports = (free_port(), free_port())
        self.primary = self.ports[0]
        self._group = ProcessGroup()
        self._processes: dict[int, subprocess.Popen[bytes]] = {}
        self.forwarder: Forwarder | None = None

    @property
    def replica(self) -> int:
        return next(port for port in self.ports if port != self.primary)

    @property
    def url(self) -> str:
        """The stable address every process under test is given."""
        assert self.forwarder is not None
        return f"redis://:{quote(self.password, safe='')}@127.0.0.1:{self.forwarder.port}/0"

    def server(self, port: int) -> redis.Redis:
        """A client of one server itself (not through the stable address)."""
        return redis.Redis(port=port, password=self.password, socket_timeout=2)

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._start_server(self.primary)
        self._start_server(self.replica, replica_of=self.primary)
        self.forwarder = Forwarder(self.directory, self.primary)

    def _start_server(self, port: int, replica_of: int | None = None) -> None:
        config = self.directory / f"redis-{port}.conf"
        config.touch(mode=0o600)
        lines = [
            f"port {port}",
            "bind 127.0.0.1",
            f"dir {self.directory}",
            f"requirepass {self.password}",
            f"masterauth {self.password}",
            'save ""',
            "appendonly no",
            "set-proc-title no",  # keeps its environment readable (worker/local/embedded.py)
        ]
        if replica_of is not None:
            lines.append(f"replicaof 127.0.0.1 {replica_of}")
        config.write_text("\n".join(lines) + "\n")
        self._processes[port] = self._group.start(
            f"redis-{port}",
            [redis_server_binary(), str(config)],
            log_path=self.directory / f"redis-{port}.log",
        )
        client = self.server(port)
        if replica_of is None:
            wait_until(lambda: answers_ping(client), 15, f"redis on {port}")
        else:
            wait_until(lambda: replicating(client), 30, f"redis on {port} to sync")

    def replicated(self, key: str) -> bool:
        """Whether the replica holds what the primary holds at ``key``."""
        value = self.server(self.primary).get(key)
        return value is not None and self.server(self.replica).get(key) == value

    def flip(self) -> None:
        """Fail over as a managed service does: the replica promoted, the stable address moved
        to it, and the old primary, every connection to it still open, made its replica."""
        old, new = self.primary, self.replica
        self.server(new).replicaof("NO", "ONE")
        assert self.forwarder is not None
        self.forwarder.switch(new)
        self.primary = new
        self.server(old).replicaof("127.0.0.1", new)

    def wait_for_replica(self, timeout: float = 30.0) -> None:
        """Wait until the replica (the old primary, after :meth:`flip`) is in sync."""
        wait_until(lambda: replicating(self.server(self.replica)), timeout, "the replica's sync")

    def restart_empty(self, down_seconds: float = 2.0) -> None:
        """SIGKILL the primary and start it again on its port with an empty dataset, after
        ``down_seconds`` (a restart is not instant); the replica follows it, emptied too."""
        process = self._processes[self.primary]
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        time.sleep(down_seconds)
        self._start_server(self.primary)

    def exited(self) -> list[tuple[int, int]]:
        """The servers that exited (not the one :meth:`restart_empty` replaced), and the
        forwarder (port 0) if it did: by port, with the exit code."""
        exited = [
            (port, code)
            for port, process in self._processes.items()
            if (code := process.poll()) is not None
        ]
        if self.forwarder is not None:
            exited += [(0, code) for _, code in self.forwarder.exited()]
        return exited

    def stop(self) -> None:
        if self.forwarder is not None:
            self.forwarder.stop()
        self._group.stop()
