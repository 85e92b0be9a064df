"""Test sessions side by side on one machine pick their servers' ports in ranges of their own
(tests/support/port_ranges.py), each held by a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from tests.support.port_ranges import FIRST_PORT, PORTS_PER_SLOT, SLOTS
from tests.support.processes import python_until_stdin_closes
from worker.local.embedded import FREE_PORT_LEDGER_ENV, FREE_PORT_RANGE_ENV, free_port

ROOT = Path(__file__).resolve().parents[2]

CLAIM = """
import sys
from pathlib import Path
from tests.support.port_ranges import claim_port_range
print(claim_port_range(Path(sys.argv[1])), flush=True)
sys.stdin.readline()
"""


@contextmanager
def session(lock_directory: Path, **environment: str) -> Iterator[str]:
    """A process that claims a range and holds it until the block ends; yields its range."""
    env = {k: v for k, v in os.environ.items() if k != FREE_PORT_RANGE_ENV}
    with python_until_stdin_closes(
        CLAIM, str(lock_directory), env={**env, **environment}, cwd=ROOT
    ) as printed:
        yield printed.strip()


def test_sessions_running_at_once_hold_ranges_that_do_not_overlap(tmp_path: Path) -> None:
    with session(tmp_path) as first, session(tmp_path) as second, session(tmp_path) as third:
        ranges = [first, second, third]
    bounds = [tuple(int(port) for port in chosen.split("-")) for chosen in ranges]
    assert len(set(ranges)) == 3
    for low, high in bounds:
        assert high - low + 1 == PORTS_PER_SLOT
        assert low >= FIRST_PORT
        assert high < 32_768  # below Linux's ephemeral ports


def test_a_range_is_free_again_once_its_session_ended(tmp_path: Path) -> None:
    with session(tmp_path) as first:
        pass
    with session(tmp_path) as again:
        assert again == first


def test_a_session_given_a_range_keeps_it_and_holds_no_slot(tmp_path: Path) -> None:
    given_range = {FREE_PORT_RANGE_ENV: "40000-40009"}
    with session(tmp_path, **given_range) as given, session(tmp_path) as other:
        assert given == "40000-40009"
        assert other == f"{FIRST_PORT}-{FIRST_PORT + PORTS_PER_SLOT - 1}"


def test_with_every_slot_held_a_session_falls_back_to_the_kernel_s_ports(
    tmp_path: Path,
) -> None:
    with ExitStack() as sessions:
        held = [sessions.enter_context(session(tmp_path)) for _ in range(SLOTS)]
        extra = sessions.enter_context(session(tmp_path))
        assert len(set(held)) == SLOTS
        assert extra == "None"


def test_a_process_a_session_starts_never_picks_a_port_the_session_handed_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ten ports above every slot and below the kernel's own: nothing else picks there.
    monkeypatch.setenv(FREE_PORT_RANGE_ENV, "32100-32109")
    monkeypatch.setenv(FREE_PORT_LEDGER_ENV, str(tmp_path / "ports"))
    handed_out = {free_port() for _ in range(9)}  # not bound yet, as a server starting

    picked_by_child = subprocess.run(
        [sys.executable, "-c", "from worker.local.embedded import free_port; print(free_port())"],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()

    assert len(handed_out) == 9
    assert {int(picked_by_child)} == set(range(32100, 32110)) - handed_out
