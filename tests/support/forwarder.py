"""A small TCP forwarder standing in for a managed Redis's DNS name: clients connect to one
stable address, and each new connection is forwarded to the port named in a target file.
Switching the target (:meth:`Forwarder.switch`) is what a managed service's failover does to
its DNS name: new connections reach the new primary, while connections already open stay on
the old server, as they do on a real name (a client resolves it when it connects).
:meth:`Forwarder.partition` cuts the network between the clients and the server until
:meth:`Forwarder.heal`: nothing flows either way on the connections already open, and a new
one reaches nothing (the bytes wait, as a partition's packets are dropped and resent by TCP,
and flow again once it heals unless a side gave up on its connection first).

It runs as a process of its own (``python -m tests.support.forwarder``), so that the test's
own threads never slow the traffic of the processes under test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path

from worker.local.embedded import ProcessGroup, free_port, port_open, wait_until

CHUNK = 64 * 1024
PARTITION_POLL_SECONDS = 0.05


class Forwarder:
    """The forwarder process: listens on :attr:`port`, forwards to the target port."""

    def __init__(self, directory: Path, target: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.target_file = directory / f"forwarder-{self.port}.target"
        self.partition_file = directory / f"forwarder-{self.port}.partitioned"
        self.partition_file.unlink(missing_ok=True)
        self.target = target
        self._write(target)
        self._group = ProcessGroup()
        self._group.start(
            "forwarder",
            [
                sys.executable,
                "-m",
                "tests.support.forwarder",
                "--port",
                str(self.port),
                "--target-file",
                str(self.target_file),
                "--partition-file",
                str(self.partition_file),
            ],
            log_path=directory / f"forwarder-{self.port}.log",
            cwd=Path(__file__).resolve().parents[2],
        )
        wait_until(lambda: port_open("127.0.0.1", self.port), 15, "the forwarder")

    def switch(self, target: int) -> None:
        """Forward every new connection to ``target`` from now on."""
        self.target = target
        self._write(target)

    def partition(self) -> None:
        """Cut the network between the clients and the server (see the module's docstring)."""
        self.partition_file.touch()
        time.sleep(2 * PARTITION_POLL_SECONDS)  # the forwarder has seen it

    def heal(self) -> None:
        self.partition_file.unlink(missing_ok=True)
        time.sleep(2 * PARTITION_POLL_SECONDS)

    def _write(self, target: int) -> None:
        partial = self.target_file.with_suffix(".partial")
        partial.write_text(str(target))
        partial.replace(self.target_file)  # never a half-written port

    def exited(self) -> list[tuple[str, int]]:
        return self._group.exited()

    def stop(self) -> None:
        self._group.stop()


async def _pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, connected: asyncio.Event
) -> None:
    try:
        while data := await reader.read(CHUNK):
            await connected.wait()
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()


async def _watch_partition(partition_file: Path, connected: asyncio.Event) -> None:
    while True:
        if partition_file.exists():
            connected.clear()
        else:
            connected.set()
        await asyncio.sleep(PARTITION_POLL_SECONDS)


async def _serve(port: int, target_file: Path, partition_file: Path) -> None:
    connected = asyncio.Event()
    connected.set()

    async def forward(client_reader: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        await connected.wait()
        target = int(target_file.read_text())  # at connect time, as a name is resolved
        try:
            server_reader, server = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            client.close()
            return
        await asyncio.gather(
            _pipe(client_reader, server, connected), _pipe(server_reader, client, connected)
        )

    watcher = asyncio.create_task(_watch_partition(partition_file, connected))
    listener = await asyncio.start_server(forward, "127.0.0.1", port, backlog=512)
    async with listener:
        await listener.serve_forever()
    watcher.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--target-file", type=Path, required=True)
    parser.add_argument("--partition-file", type=Path, required=True)
    arguments = parser.parse_args()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    asyncio.run(_serve(arguments.port, arguments.target_file, arguments.partition_file))


if __name__ == "__main__":
    main()
