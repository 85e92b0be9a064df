"""One stack per data directory: the lock ``up`` holds is what the CLI asks whether a stack
runs, whatever ``stack.json`` says (real OS file locks, taken by a real second process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.processes import python_until_stdin_closes
from worker.local.stack_lock import StackAlreadyRunning, hold
from worker.local.stack_state import read_stack

HOLD_UNTIL_STDIN_CLOSES = """
import sys
from pathlib import Path
from worker.local.stack_lock import hold
hold(Path(sys.argv[1]), {"pid": 1, "api_url": "http://127.0.0.1:1"})
print("held", flush=True)
sys.stdin.read()
"""


def write_stack_file(data_dir: Path, **fields: object) -> None:
    (data_dir / "stack.json").write_text(json.dumps({"api_url": "http://x", **fields}))


def test_a_stack_whose_lock_is_held_is_running_though_its_stack_file_says_stopped(
    tmp_path: Path,
) -> None:
    write_stack_file(tmp_path, stopped=True)
    with python_until_stdin_closes(HOLD_UNTIL_STDIN_CLOSES, str(tmp_path)) as printed:
        assert printed == "held\n"
        while_held = read_stack(tmp_path)
        with pytest.raises(StackAlreadyRunning, match="already running on"):
            hold(tmp_path, {"pid": 2})

    assert while_held["stopped"] is False
    assert read_stack(tmp_path)["stopped"] is True


def test_a_stack_file_left_by_a_killed_up_is_called_stopped_once_its_lock_is_free(
    tmp_path: Path,
) -> None:
    write_stack_file(tmp_path)  # never marked stopped: its `up` was killed
    hold(tmp_path, {"pid": 1}).release()

    assert read_stack(tmp_path)["stopped"] is True
