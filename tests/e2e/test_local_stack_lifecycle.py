"""`billing-worker up` over a life: the demo data and its ids, one clock (shown, moved, reset)
in every row the stack and its admin commands write, a demo secret that works after a
rotation and a restart, Flower's password kept, one stack per data directory, and `up --fresh`
to start over."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.db.engine import session_factory
from adapters.db.models import OrganizationRow
from tests.support.cli import Done, billing_worker
from tests.support.raw_messages import dead_letter_of, envelope, last_letter_id, push
from tests.support.stack import eventually
from worker.local.embedded import free_port
from worker.local.seed import DEMO_DATA

pytestmark = pytest.mark.e2e

USUAL_UMASK = 0o022
"""What ``up`` is started with here, as on most machines: it must not rely on a stricter one."""

DAY = 86_400


@dataclass
class Up:
    """One `billing-worker up` on ``data_dir``, with what it printed until ready."""

    data_dir: Path
    process: subprocess.Popen[str]
    banner: list[str]

    @property
    def stack(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((self.data_dir / "stack.json").read_text())
        return loaded

    def printed(self, label: str) -> str:
        """The banner's line for ``label`` (``Client``, ``Clock``…), label removed."""
        [line] = [line for line in self.banner if line.strip().startswith(f"{label} ")]
        return line.strip().removeprefix(label).strip()

    def secret(self) -> tuple[str, str]:
        _, client_id, _, secret = self.printed("Client").split()
        return client_id, secret

    def cli(self, *args: str) -> Done:
        return billing_worker(*args, env={"BILLING_DATA_DIR": str(self.data_dir)})

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        self.process.wait(30)
        assert self.process.stdout is not None
        self.process.stdout.close()


def start_up(data_dir: Path, *extra: str) -> Up:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BILLING_")}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "worker.cli",
            "up",
            "--data-dir",
            str(data_dir),
            "--api-port",
            str(free_port()),
            "--flower-port",
            str(free_port()),
            *extra,
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        umask=USUAL_UMASK,
    )
    assert process.stdout is not None
    banner: list[str] = []
    for line in process.stdout:  # click flushes every line it prints
        banner.append(line.rstrip("\n"))
        if line.startswith("Ctrl-C stops everything"):
            return Up(data_dir, process, banner)
    process.wait(30)
    raise AssertionError("up stopped before it was ready:\n" + "\n".join(banner))


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    started = start_up(tmp_path_factory.mktemp("lifecycle"))
    try:
        yield started
    finally:
        started.stop()


def answers(up: Up, client_id: str, secret: str) -> int:
    return httpx.post(
        f"{up.stack['api_url']}/v1beta1/users/usr_demo/enable",
        json={},
        auth=(client_id, secret),
        timeout=30,
    ).status_code


def flower_password(up: Up) -> str:
    return up.printed("Flower").rsplit("password ", 1)[1]


def clock(up: Up) -> dict[str, Any]:
    done = up.cli("clock", "show", "--json")
    assert done.status == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


def near(moment: datetime, expected: datetime, slack: float = 120) -> bool:
    return abs((moment.replace(tzinfo=moment.tzinfo or UTC) - expected).total_seconds()) < slack


def test_up_prints_the_demo_data_with_its_ids_and_demo_lists_it_again(up: Up) -> None:
    start = up.banner.index("Demo data (`billing-worker demo` lists it again):")
    table = up.banner[start + 1 : start + 2 + len(DEMO_DATA)]
    listed = json.loads(up.cli("demo", "--json").stdout)

    assert table[0].split() == ["KIND", "ID", "WHAT"]
    for record, row in zip(DEMO_DATA, table[1:], strict=True):
        assert row.split()[len(record.kind.split())] == record.id, row
    assert [record["id"] for record in listed["data"]] == [record.id for record in DEMO_DATA]
    assert (listed["client_id"], listed["client_secret"]) == up.secret()
    assert answers(up, *up.secret()) == 200


def test_clock_show_gives_the_offset_and_the_shifted_now_and_reset_brings_real_time_back(
    up: Up,
) -> None:
    assert up.cli("clock", "advance", "2d", "--reason", "renewals").status == 0
    moved = clock(up)

    reset = up.cli("clock", "reset", "--reason", "done")
    after = clock(up)

    now = datetime.now(UTC)
    assert moved["offset_seconds"] == 2 * DAY
    assert near(datetime.fromisoformat(moved["now"]), now + timedelta(days=2))
    assert near(datetime.fromisoformat(moved["stripe_emulator_now"]), now + timedelta(days=2))
    assert reset.stdout.strip() == "the clock is back to real time (it was 2.00 days ahead)"
    assert after["offset_seconds"] == 0
    assert near(datetime.fromisoformat(after["now"]), now)
    assert near(datetime.fromisoformat(after["stripe_emulator_now"]), now)


def test_rows_written_by_admin_commands_and_dead_letters_carry_the_stack_s_clock(
    up: Up,
) -> None:
    assert up.cli("clock", "advance", "10d", "--reason", "renewals").status == 0
    try:
        created = up.cli("orgs", "create", "--name", "stamped")
        raw = envelope(task="reports.nightly", queue="billing")
        mark = last_letter_id(up.stack["redis_url"])
        push(up.stack["redis_url"], "billing", raw)
        letter = eventually(
            lambda: dead_letter_of(up.stack["redis_url"], raw, "billing", mark), what="a letter"
        )
    finally:
        assert up.cli("clock", "reset", "--reason", "done").status == 0

    shifted_now = datetime.now(UTC) + timedelta(days=10)
    with session_factory(up.stack["database_url"])() as session:
        row = session.get(OrganizationRow, created.stdout.strip())
        assert row is not None
        assert near(row.created_at, shifted_now)
    assert near(letter.at, shifted_now)


def test_status_says_the_stack_runs_where_its_api_is_and_that_its_redis_answers(
    up: Up,
) -> None:
    done = up.cli("status", "--json")

    assert done.status == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["running"] is True
    assert shown["up_pid"] == up.process.pid
    assert shown["api_url"] == up.stack["api_url"]
    assert shown["redis"]["answers"] is True
    assert "***" in shown["redis"]["url"]  # its password masked


def test_a_second_up_on_a_running_stack_s_data_directory_is_refused_in_one_line(up: Up) -> None:
    recorded = up.stack
    other_ports = ("--api-port", str(free_port()), "--flower-port", str(free_port()))

    second = up.cli("up", *other_ports)

    assert second.status == 1
    assert second.stderr.splitlines() == [
        f"a stack is already running on {up.data_dir} (API {recorded['api_url']}, `up` pid "
        f"{up.process.pid}): stop it (Ctrl-C where it runs) first, or give another --data-dir"
    ]
    # The first runs on, untouched, and the CLI calls it running.
    assert up.process.poll() is None
    assert up.stack == recorded
    assert answers(up, *up.secret()) == 200
    assert clock(up)["offset_seconds"] == 0


def test_a_second_up_prints_a_working_secret_after_a_rotation_and_keeps_the_clock(
    tmp_path: Path,
) -> None:
    first = start_up(tmp_path)
    try:
        client_id, printed_first = first.secret()
        flower_first = flower_password(first)
        rotated = first.cli("clients", "rotate-secret", client_id, "--reason", "shown", "--json")
        live_secret = json.loads(rotated.stdout)["client_secret"]
        demo_after_rotation = json.loads(first.cli("demo", "--json").stdout)
        assert answers(first, client_id, live_secret) == 200
        assert first.cli("clock", "advance", "3d", "--reason", "renewals").status == 0
        running = billing_worker("up", "--fresh", "--yes", env={"BILLING_DATA_DIR": str(tmp_path)})
    finally:
        first.stop()
    assert rotated.status == 0, rotated.stderr
    assert running.status == 1
    assert "a stack is already running on" in running.stderr

    # `demo` prints the live secret at once, not the one the rotation withdrew.
    assert demo_after_rotation["client_secret"] == live_secret

    second = start_up(tmp_path)
    try:
        printed_second = second.secret()
        clock_line = second.printed("Clock")
        assert answers(second, *printed_second) == 200
        assert answers(second, client_id, printed_first) == 401
        org = second.cli("orgs", "create", "--name", "before-fresh").stdout.strip()
    finally:
        second.stop()
    assert printed_second == (client_id, live_secret)  # the operator's rotation, kept
    assert flower_password(second) == flower_first  # kept
    assert clock_line.startswith("3.00 days ahead of real time")

    fresh = start_up(tmp_path, "--fresh", "--yes")
    try:
        assert fresh.banner[0].startswith(f"wiped {tmp_path}: billing.db")
        assert fresh.printed("Clock").startswith("real time")
        assert flower_password(fresh) == flower_first
        assert answers(fresh, *fresh.secret()) == 200
        with session_factory(fresh.stack["database_url"])() as session:
            assert session.get(OrganizationRow, org) is None
            assert session.get(OrganizationRow, "org_demo") is not None
    finally:
        fresh.stop()


def readable_by_others(directory: Path) -> list[str]:
    """Every directory and file in ``directory`` (itself included) that its group or other
    users may read, write or enter, with its mode."""
    found = []
    for root, _, files in os.walk(directory):
        for path in (Path(root), *(Path(root) / name for name in files)):
            mode = path.lstat().st_mode
            if not stat.S_ISLNK(mode) and mode & 0o077:
                found.append(f"{path.relative_to(directory)} {stat.filemode(mode)}")
    return found


def test_up_keeps_its_data_directory_to_its_owner_and_its_redis_password_out_of_the_banner(
    tmp_path: Path,
) -> None:
    # A data directory from an earlier run, made under the usual umask.
    data_dir = tmp_path / "data"
    logs = data_dir / "logs"
    logs.mkdir(parents=True)
    (logs / "api.log").write_text("a line of an earlier run\n")
    for path, mode in ((data_dir, 0o755), (logs, 0o755), (logs / "api.log", 0o644)):
        path.chmod(mode)

    started = start_up(data_dir)
    try:
        eventually(lambda: (data_dir / "redis" / "appendonlydir").is_dir(), 30, "Redis's files")
        while_running = readable_by_others(data_dir)
        redis_line = started.printed("Redis")
    finally:
        started.stop()

    assert while_running == []
    # Nor what the children write as they stop: each of them wrote its files by now.
    assert [name for name in CHILDREN_S_FILES if not any(data_dir.glob(name))] == []
    assert readable_by_others(data_dir) == []
    password = (data_dir / "redis" / "redis-password").read_text().strip()
    assert all(password not in line for line in started.banner)
    assert redis_line.startswith("redis://:***@127.0.0.1:")
    assert str(data_dir / "redis" / "redis-password") in redis_line


CHILDREN_S_FILES = (
    # The database, Redis's append-only files, beat's schedule, Flower's database, the
    # worker's metrics, the emulator's state, the logs.
    "billing.db",
    "redis/appendonlydir/*",
    "celerybeat-schedule*",
    "flower.db*",
    "metrics/worker/*",
    "stripe-emulator.json",
    "logs/worker.log",
)
