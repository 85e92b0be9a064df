"""A Redis Sentinel topology split by a network partition (issue 41, item 4a): the primary in
a network namespace of its own, the replica and three sentinels in the root namespace.

The product's topology (``worker.local.sentinel``) binds every server to 127.0.0.1, which a
namespace cannot reach; this one binds where each side can reach the other, over one link
(tests/support/netns.py), and announces those addresses:

- the primary listens on the link's namespace address (where the sentinels, the replica and
  every client find it, from either side);
- the replica and the sentinels listen on 127.0.0.1 and on the link's root address, and
  announce the root address, so that a worker node placed in the namespace reaches them (and
  the primary, once demoted, reaches its new primary) through the link.

Cutting the link leaves the primary serving the processes of its namespace, as a real old
primary keeps serving the clients on its side, while the sentinels, on the other side, see it
down and promote the replica. Healed, the sentinels make the old primary a replica of the new
one, which drops what it took meanwhile.
"""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import redis

from tests.support.netns import Link, Namespace
from worker.local.embedded import ProcessGroup, free_port, redis_server_binary, wait_until
from worker.local.sentinel import answers_ping, replicating

MASTER_NAME = "billing-primary"
SENTINELS = 3
QUORUM = 2
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 3000
SOCKET_TIMEOUT_SECONDS = 2.0
"""The clients' ``BILLING_REDIS_SOCKET_TIMEOUT_SECONDS``: a connection into the partition is
given up after this, and the client asks the sentinels again."""


@dataclass
class SplitSentinels:
    """Start with :meth:`start`, stop with :meth:`stop`; cut and heal with :attr:`link`."""

    directory: Path
    side: Namespace
    """The namespace the primary starts in (the side that will be cut off)."""
    link: Link
    password: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    sentinel_password: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    primary_port: int = 0
    replica_port: int = 0
    sentinel_ports: list[int] = field(default_factory=list)
    group: ProcessGroup = field(default_factory=ProcessGroup)

    @property
    def primary_host(self) -> str:
        return self.link.namespace_address

    @property
    def replica_host(self) -> str:
        return self.link.root_address

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.primary_port, self.replica_port = free_port(), free_port()
        self._server("primary", self.primary_port, [f"bind {self.primary_host}"], self.side)
        wait_until(lambda: answers_ping(self.client(self.primary_host, self.primary_port)), 15, "P")
        self._server(
            "replica",
            self.replica_port,
            [
                f"bind 127.0.0.1 {self.replica_host}",
                f"replica-announce-ip {self.replica_host}",
                f"replicaof {self.primary_host} {self.primary_port}",
            ],
        )
        replica = self.client(self.replica_host, self.replica_port)
        wait_until(lambda: replicating(replica), 30, "the replica to sync")
        for number in range(1, SENTINELS + 1):
            self._sentinel(f"sentinel-{number}")
        wait_until(self._sentinels_ready, 30, "the sentinels to see the replica and each other")

    def _config(self, name: str, lines: list[str]) -> Path:
        directory = self.directory / name
        directory.mkdir(parents=True, exist_ok=True)
        config = directory / "redis.conf"
        config.touch(mode=0o600)  # passwords: never on a command line
        config.chmod(0o600)
        config.write_text("\n".join([f"dir {directory}", "set-proc-title no", *lines]) + "\n")
        return config

    def _server(
        self, name: str, port: int, lines: list[str], namespace: Namespace | None = None
    ) -> None:
        config = self._config(
            name,
            [
                f"port {port}",
                f"requirepass {self.password}",
                f"masterauth {self.password}",
                'save ""',
                "appendonly no",
                *lines,
            ],
        )
        self.group.start(
            name,
            [*(namespace.exec_prefix if namespace else []), redis_server_binary(), str(config)],
            log_path=self.directory / f"{name}.log",
        )

    def _sentinel(self, name: str) -> None:
        port = free_port()
        config = self._config(
            name,
            [
                f"port {port}",
                f"bind 127.0.0.1 {self.link.root_address}",
                f"sentinel announce-ip {self.link.root_address}",
                f"requirepass {self.sentinel_password}",
                f"sentinel monitor {MASTER_NAME} {self.primary_host} {self.primary_port} {QUORUM}",
                f"sentinel auth-pass {MASTER_NAME} {self.password}",
                f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}",
                f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}",
            ],
        )
        self.group.start(
            name,
            [redis_server_binary(), str(config), "--sentinel"],
            log_path=self.directory / f"{name}.log",
        )
        self.sentinel_ports.append(port)

    def client(self, host: str, port: int) -> redis.Redis:
        """A client of one data server itself (not through the sentinels)."""
        return redis.Redis(host=host, port=port, password=self.password, socket_timeout=1)

    def primary_url(self) -> str:
        """The first primary's URL (the test's own ping of the workers, before the cut)."""
        return f"redis://:{self.password}@{self.primary_host}:{self.primary_port}/0"

    def named_primary(self) -> tuple[str, int] | None:
        """The primary the sentinels name now, in a state clients accept (not down), or
        ``None`` when no sentinel answers so."""
        for port in self.sentinel_ports:
            sentinel: Any = redis.Redis(
                port=port, password=self.sentinel_password, socket_timeout=1
            )  # redis-py's sentinel_* are untyped
            with contextlib.suppress(redis.RedisError):
                state = cast(dict[str, Any], sentinel.sentinel_master(MASTER_NAME))
                if state["is_master"] and not (state["is_sdown"] or state["is_odown"]):
                    return str(state["ip"]), int(state["port"])
        return None

    def role(self, host: str, port: int) -> str | None:
        """``master`` or ``slave`` as the server says, ``None`` when it does not answer."""
        with contextlib.suppress(redis.RedisError):
            return str(self.client(host, port).info("replication")["role"])
        return None

    def replica_promoted(self) -> bool:
        return self.named_primary() == (self.replica_host, self.replica_port) and (
            self.role(self.replica_host, self.replica_port) == "master"
        )

    def old_primary_demoted(self) -> bool:
        return self.role(self.primary_host, self.primary_port) == "slave" and replicating(
            self.client(self.primary_host, self.primary_port)
        )

    def _sentinels_ready(self) -> bool:
        for port in self.sentinel_ports:
            sentinel: Any = redis.Redis(
                port=port, password=self.sentinel_password, socket_timeout=1
            )
            try:
                state = sentinel.sentinel_master(MASTER_NAME)
            except redis.RedisError:
                return False
            if int(state["num-slaves"]) < 1 or int(state["num-other-sentinels"]) < SENTINELS - 1:
                return False
        return True

    def settings_env(self) -> dict[str, str]:
        """The ``BILLING_*`` settings of a process that finds the primary through the
        sentinels, from either side of the link."""
        return {
            "BILLING_REDIS_SENTINELS": ",".join(
                f"{self.link.root_address}:{port}" for port in self.sentinel_ports
            ),
            "BILLING_REDIS_MASTER_NAME": MASTER_NAME,
            "BILLING_REDIS_PASSWORD": self.password,
            "BILLING_REDIS_SENTINEL_PASSWORD": self.sentinel_password,
            "BILLING_REDIS_SOCKET_TIMEOUT_SECONDS": str(SOCKET_TIMEOUT_SECONDS),
        }

    def stop(self) -> None:
        self.group.stop()
