"""`python3 -m worker.dev up --help` and `test --help` print help at once: nothing installed
(no virtualenv made), no linter or type checker run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def dev(*args: str, venv: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BILLING_VENV": str(venv)}
    return subprocess.run(
        [sys.executable, "-m", "worker.dev", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("command", ["up", "test"])
def test_help_on_a_fresh_machine_installs_nothing_and_runs_nothing(
    command: str, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"

    done = dev(command, "--help", venv=venv)

    assert done.returncode == 0, done.stderr
    assert f"python3 -m worker.dev {command}" in done.stdout
    assert not venv.exists()  # no virtualenv made, so nothing installed
    assert "+ " not in done.stdout  # no command run (ruff, mypy, pip)


def test_up_help_in_a_checkout_set_up_before_lists_up_s_own_options() -> None:
    done = dev("up", "--help", venv=Path(sys.executable).parents[1])

    assert done.returncode == 0, done.stderr
    assert "--api-port" in done.stdout
    assert "==>" not in done.stdout  # nothing installed
