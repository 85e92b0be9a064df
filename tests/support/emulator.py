"""A Stripe emulator process (``python -m stripe_emulator``) for the tests."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from stripe_emulator import DEFAULT_API_KEY, EmulatorAdmin
from worker.local.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]
EMULATOR_KEY = DEFAULT_API_KEY


@dataclass
class EmulatorProcess:
    """An emulator started with ``python -m stripe_emulator``."""

    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        return self.process.returncode


def start_emulator(
    log_path: Path,
    *args: str,
    ready_timeout: float = 15.0,
    run_in: Sequence[str] = (),
    host: str = "127.0.0.1",
) -> EmulatorProcess:
    """Start an emulator on a free port of ``host`` and wait until its admin API answers;
    ``run_in`` goes before its command line (``ip netns exec NAME``: it runs in that network
    namespace, ``host`` being its address there)."""
    port = free_port()
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                *run_in,
                sys.executable,
                "-m",
                "stripe_emulator",
                "--host",
                host,
                "--port",
                str(port),
                *args,
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    emulator = EmulatorProcess(process, f"http://{host}:{port}", log_path)
    try:
        with EmulatorAdmin(emulator.url) as admin:
            admin.wait_until_ready(ready_timeout)
    except TimeoutError:
        emulator.stop(signal.SIGKILL)
        raise RuntimeError(f"emulator did not start:\n{emulator.log()}") from None
    return emulator


@contextlib.contextmanager
def running_emulator(log_path: Path, *args: str) -> Iterator[EmulatorProcess]:
    emulator = start_emulator(log_path, *args)
    try:
        yield emulator
    finally:
        emulator.stop()
