"""The tutorial (``docs/tutorial/index.md``) run as it is written, from where the README's five
minutes leave a new user: the README's ``sh`` block, then the tutorial's, in order, in one
shell, beside a ``billing-worker up`` of its own. Only the API's port and the receiver's are
changed, to free ones, and the README's placeholder secret is read where `up` keeps it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from tests.support.environment import settings_environment
from tests.support.local_up import running_up
from tests.support.stack import eventually
from worker.local.embedded import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial" / "index.md"
README = ROOT / "README.md"
README_SECRET = re.compile(r"^SECRET=kq3….*$", re.MULTILINE)
"""The README's placeholder for the secret `up` printed: the test reads it where `up` keeps it,
as the tutorial's own first block does."""
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.DOTALL | re.MULTILINE)
DOCUMENTED_API = "http://127.0.0.1:8080"
DOCUMENTED_RECEIVER_PORT = "9999"


def printed(output: Path, line: str) -> bool:
    return line in output.read_text().splitlines()


def tutorial_script() -> str:
    blocks = SH_BLOCK.findall(TUTORIAL.read_text())
    assert blocks, f"{TUTORIAL} has no sh block"
    return "\n".join(blocks)


def readme_five_minutes() -> str:
    """The README's ``sh`` block of "Five minutes on `up`", its secret read from the data
    directory."""
    section = README.read_text().split("## Five minutes on `up`", 1)[1].split("\n## ", 1)[0]
    [block] = SH_BLOCK.findall(section)
    first_block = SH_BLOCK.findall(TUTORIAL.read_text())[0]
    [read_secret] = [line for line in first_block.splitlines() if line.startswith("SECRET=")]
    replaced, count = README_SECRET.subn(lambda _placeholder: read_secret, block)
    assert count == 1, "the README's block no longer sets SECRET as this test expects"
    return replaced


def test_after_the_readme_the_tutorial_s_commands_run_as_written_and_the_receiver_gets_them(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / ".billing-worker"
    data_dir.mkdir()
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # run from a checkout's root
    receiver_port = str(free_port())
    with running_up(data_dir) as stack:
        script = f"{readme_five_minutes()}\n{tutorial_script()}".replace(
            DOCUMENTED_API, stack["api_url"]
        ).replace(DOCUMENTED_RECEIVER_PORT, receiver_port)
        env = settings_environment(
            {
                # The virtualenv active, as the tutorial asks (`source .venv/bin/activate`).
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                "BILLING_DATA_DIR": str(data_dir),
            }
        )
        # The receiver runs on in the background: its pid is kept, whatever happens.
        keep_receiver_pid = "trap 'echo ${!:-} > receiver.pid' EXIT"
        done = subprocess.run(
            ["bash", "-c", f"set -euo pipefail\n{keep_receiver_pid}\n{script}"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        pid_file = tmp_path / "receiver.pid"
        receiver_pid = pid_file.read_text().strip() if pid_file.exists() else ""
        try:
            assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
            received = tmp_path / "receiver.log"
            for line in (
                "subscription.plan_change.applied sub_tour",
                "subscription.plan_changed sub_tour",
            ):
                eventually(
                    partial(printed, received, line),
                    30,
                    f"the receiver to print {line!r} (it printed {received.read_text()!r})",
                )
        finally:
            if receiver_pid:
                os.kill(int(receiver_pid), signal.SIGTERM)
