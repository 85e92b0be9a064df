"""The Stripe emulator is a distribution of its own, absent from the production image: the
commands that run it say so in one line when it is not installed.

Each command runs in a Python process where ``import stripe_emulator`` finds nothing, as in an
environment that never installed it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.environment import settings_environment

WITHOUT_THE_EMULATOR = (
    "import sys; sys.modules['stripe_emulator'] = None; from worker.cli import main; main()"
)


def run_without_the_emulator(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = settings_environment({"BILLING_DATA_DIR": str(data_dir)})
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_EMULATOR, *args],
        env=env,
        cwd=data_dir,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "command", [("up",), ("clock", "advance", "1d"), ("stripe-emulator", "--help")]
)
def test_a_command_that_runs_the_emulator_says_in_one_line_that_it_is_not_installed(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    completed = run_without_the_emulator(tmp_path, *command)

    assert completed.returncode == 1
    [line] = completed.stderr.strip().splitlines()
    assert line.startswith("the Stripe emulator is not installed: run `pip install -e")


def test_up_without_the_emulator_suggests_real_stripe_and_starts_nothing(tmp_path: Path) -> None:
    completed = run_without_the_emulator(tmp_path, "up")

    assert completed.stderr.strip().endswith("or set BILLING_STRIPE_API_KEY to use Stripe")
    assert not (tmp_path / "logs").exists()
