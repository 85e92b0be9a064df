"""Admin commands as an operator meets them: every list has a header and says when it is
empty; the local stack's data directory is found from below it, and where it is not found
the error names the path tried (passwords masked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.db.engine import session_factory
from adapters.db.migrate import upgrade
from adapters.db.models import OrganizationRow
from tests.support.cli import assert_refused_in_one_line, billing_worker
from worker.local.embedded import free_port

UNAVAILABLE = 3

EMPTY_LISTS = [
    (("clients", "list"), "no API clients"),
    (("plans", "list"), "no plans"),
    (("webhooks", "list"), "no webhook endpoints"),
    (("webhooks", "deliveries"), "no webhook deliveries"),
    (("webhooks", "deliveries", "--failed"), "no webhook deliveries match"),
    (("stripe", "webhooks", "list"), "no endpoint registered"),
    (("commands", "failed"), "no failed commands"),
    (("dead-letters", "list"), "no dead letters kept"),
]


@pytest.fixture(scope="module")
def empty_env(redis_server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A migrated database holding nothing, and a Redis database no test writes to."""
    data_dir = tmp_path_factory.mktemp("empty")
    upgrade(f"sqlite:///{data_dir / 'billing.db'}")
    return {"BILLING_DATA_DIR": str(data_dir), "BILLING_REDIS_URL": f"{redis_server}/14"}


@pytest.mark.parametrize(
    ("args", "says"), [pytest.param(args, says, id=" ".join(args)) for args, says in EMPTY_LISTS]
)
def test_an_empty_list_says_it_is_empty(
    empty_env: dict[str, str], args: tuple[str, ...], says: str
) -> None:
    done = billing_worker(*args, env=empty_env)

    assert done.status == 0, done.stderr
    assert done.stdout.startswith(says), done.stdout


def test_a_list_with_items_starts_with_a_header_row(empty_env: dict[str, str]) -> None:
    created = billing_worker("clients", "create", "--name", "crm", env=empty_env)
    assert created.status == 0, created.stderr

    listed = billing_worker("clients", "list", env=empty_env)

    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["CLIENT", "ID", "NAME", "STATE", "SCOPES", "ORGANIZATIONS"]
    assert [row.split()[1:3] for row in rows] == [["crm", "enabled"]]


def _local_stack_data(root: Path) -> Path:
    """A data directory as `up` leaves it in ``root``: a migrated database."""
    data_dir = root / ".billing-worker"
    data_dir.mkdir()
    upgrade(f"sqlite:///{data_dir / 'billing.db'}")
    return data_dir


def test_a_command_run_below_the_local_stack_s_directory_finds_its_data(tmp_path: Path) -> None:
    data_dir = _local_stack_data(tmp_path)
    below = tmp_path / "src" / "deeper"
    below.mkdir(parents=True)

    done = billing_worker("orgs", "create", "--name", "found", env={}, cwd=below)

    assert done.status == 0, done.stderr
    with session_factory(f"sqlite:///{data_dir / 'billing.db'}")() as session:
        assert session.get(OrganizationRow, done.stdout.strip()) is not None
    assert not (below / ".billing-worker").exists()


def test_a_command_run_away_from_any_local_stack_names_the_database_path_it_tried(
    tmp_path: Path,
) -> None:
    done = billing_worker("orgs", "create", "--name", "lost", env={}, cwd=tmp_path)

    assert_refused_in_one_line(done, status=UNAVAILABLE, says="the database is unreachable")
    assert f"sqlite:///{tmp_path / '.billing-worker' / 'billing.db'}" in done.stderr
    assert f"no local stack in {tmp_path} or its parents" in done.stderr
    assert "--data-dir" in done.stderr


def test_an_unreachable_database_is_named_with_its_password_masked(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://billing:hunter2@127.0.0.1:{free_port()}/billing"

    done = billing_worker(
        "orgs", "create", "--name", "x", env={"BILLING_DATABASE_URL": url}, cwd=tmp_path
    )

    assert_refused_in_one_line(done, status=UNAVAILABLE, says="the database is unreachable")
    assert "billing:***@127.0.0.1" in done.stderr
    assert "hunter2" not in done.stderr


def test_an_unreachable_redis_is_named_with_its_password_masked(tmp_path: Path) -> None:
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"

    done = billing_worker("dead-letters", "list", env={"BILLING_REDIS_URL": url}, cwd=tmp_path)

    assert_refused_in_one_line(done, status=UNAVAILABLE, says="Redis is unreachable at redis://")
    assert ":***@127.0.0.1" in done.stderr
    assert "hunter2" not in done.stderr
