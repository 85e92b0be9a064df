"""Running the emulator as a server process (uvicorn, httptools, uvloop)."""

from __future__ import annotations

import asyncio
import socket
import sys
from types import FrameType

import uvicorn

from stripe_emulator.app import EmulatorApp, create_app
from stripe_emulator.config import EmulatorConfig


class _Server(uvicorn.Server):
    """uvicorn's server, plus one "listening" line and prompt release of hung requests."""

    def __init__(self, config: uvicorn.Config, app: EmulatorApp) -> None:
        super().__init__(config)
        self.emulator_app = app
        self._loop: asyncio.AbstractEventLoop | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets)
        if self.should_exit:
            return
        for server in self.servers:
            for bound in server.sockets:
                host, port = bound.getsockname()[:2]
                print(
                    f"stripe-emulator listening on http://{host}:{port}",
                    file=sys.stderr,
                    flush=True,
                )

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # A hung request would hold shutdown until it times out: release it first. This runs
        # in a signal handler, so hand the work to the loop thread-safely.
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.emulator_app.emulator.faults.release_hangs)
        super().handle_exit(sig, frame)
        # uvicorn re-raises the signal once shut down, so the process would die of SIGTERM
        # (or print a KeyboardInterrupt traceback for SIGINT). A signal is how the emulator is
        # meant to be stopped: after the graceful shutdown (state saved) it exits with 0.
        self._captured_signals.clear()


def serve(config: EmulatorConfig, host: str = "127.0.0.1", port: int = 12111) -> None:
    """Run an emulator on ``host:port`` until SIGINT/SIGTERM (state saved if configured)."""
    app = create_app(config)
    server_config = uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=2,
    )
    _Server(server_config, app).run()
