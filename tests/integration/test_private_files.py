"""The data directory is its owner's alone: the launch commands create their files for the
owner only, whatever umask they start with, and ``up`` tightens what is there (its own test,
on a whole stack: tests/e2e/test_local_stack_lifecycle.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.support.cli import billing_worker
from worker.launch.private import make_private


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_migrate_started_under_the_usual_umask_creates_the_database_for_its_owner_only(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    previous = os.umask(0o022)
    try:
        done = billing_worker("migrate", env={"BILLING_DATA_DIR": str(data_dir)})
    finally:
        os.umask(previous)

    assert done.status == 0, done.stderr
    assert mode_of(data_dir / "billing.db") == 0o600


def test_making_a_directory_private_tightens_what_it_holds_and_follows_no_link(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not the data directory's")
    elsewhere.chmod(0o644)
    data_dir = tmp_path / "data"
    (data_dir / "logs").mkdir(parents=True)
    script = data_dir / "logs" / "run.sh"
    script.write_text("")
    for path, mode in ((data_dir, 0o755), (data_dir / "logs", 0o775), (script, 0o755)):
        path.chmod(mode)
    (data_dir / "link").symlink_to(elsewhere)

    assert make_private(data_dir) == []

    assert mode_of(data_dir) == 0o700
    assert mode_of(data_dir / "logs") == 0o700
    assert mode_of(script) == 0o700  # the owner's bits are kept
    assert mode_of(elsewhere) == 0o644


def test_making_a_missing_directory_private_creates_it_for_its_owner_only(tmp_path: Path) -> None:
    make_private(tmp_path / "new" / "data")

    assert mode_of(tmp_path / "new" / "data") == 0o700
