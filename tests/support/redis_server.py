from __future__ import annotations

import os
import signal
from pathlib import Path

from worker.local.embedded import ProcessGroup, free_port, redis_password, start_redis


class RedisServer:
    """A Redis server that can be stopped and started again on the same port and data."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self._group = ProcessGroup()

    @property
    def url(self) -> str:
        return f"redis://:{redis_password(self.data_dir)}@127.0.0.1:{self.port}/0"

    def start(self) -> None:
        start_redis(
            self._group,
            self.data_dir,
            port=self.port,
            log_path=self.data_dir.parent / f"redis-{self.port}.log",
        )

    def kill(self) -> None:
        """SIGKILL the server (nothing flushed beyond what its AOF already holds)."""
        for child in self._group.children:
            if child.process.poll() is None:
                os.kill(child.process.pid, signal.SIGKILL)
                child.process.wait()

    def stop(self) -> None:
        """A clean shutdown (SIGTERM): Redis flushes its append-only file."""
        self._group.stop()
