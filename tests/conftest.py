"""Session fixtures: real Redis, real SQLite and PostgreSQL, real worker and API processes.

Every test that takes ``stack`` runs once per database backend. In CI (``CI=true``) a
PostgreSQL that cannot be started fails the run instead of skipping.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from adapters.db.migrate import upgrade
from tests.support.emulator import start_emulator
from tests.support.port_ranges import claim_port_range
from tests.support.postgres import PostgresCluster, start_cluster
from tests.support.processes import leftover_guard
from tests.support.stack import Stack, stack_env
from worker.local.embedded import ProcessGroup, start_redis

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

BACKENDS = ("sqlite", "postgresql")


def pytest_configure(config: pytest.Config) -> None:
    """Each pytest process that runs tests picks the ports of its servers in a range no other
    such process on the machine holds, another suite's included (tests/support/port_ranges.py).
    pytest-xdist's controller runs none: its workers, which inherit its environment, each
    hold a range of their own."""
    runs_tests = hasattr(config, "workerinput") or not config.getoption("numprocesses", None)
    if runs_tests:
        claim_port_range()


@pytest.fixture(scope="session", autouse=True)
def nothing_outlives_the_session() -> Iterator[None]:
    """Set up before, and so torn down after, every other session fixture: fails the session
    with the command line of any process its tests started and left running, after killing
    it; a reaper kills them too if this process ends without tearing down (a timeout's
    ``os._exit``, ``kill -9``)."""
    with leftover_guard():
        yield


@pytest.fixture(scope="session")
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="billing-tests-") as path:
        yield Path(path)


@pytest.fixture(scope="session")
def redis_server(workdir: Path) -> Iterator[str]:
    """A real Redis server (the embedded binary), shared; each stack uses its own db."""
    group = ProcessGroup()
    url = start_redis(group, workdir / "redis", log_path=workdir / "redis.log")
    yield url.rsplit("/", 1)[0]
    group.stop()


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    try:
        cluster = start_cluster()
    except (FileNotFoundError, OSError) as error:
        if IN_CI:
            pytest.fail(f"PostgreSQL is required in CI: {error}")
        pytest.skip(f"PostgreSQL not available: {error}")
    except Exception as error:  # initdb/pg_ctl failed
        if IN_CI:
            raise
        pytest.skip(f"PostgreSQL could not start: {error}")
    yield cluster
    cluster.stop()


def _database(request: pytest.FixtureRequest, backend: str, workdir: Path, name: str) -> str:
    if backend == "sqlite":
        url = f"sqlite:///{workdir / f'{name}.db'}"
    else:
        cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
        url = cluster.create_database(name)
    upgrade(url)
    return url


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def stack(
    request: pytest.FixtureRequest, backend: str, workdir: Path, redis_server: str
) -> Iterator[Stack]:
    """The system on ``backend``: migrated database, a Stripe emulator of its own, a worker
    process and the API. The application clock is shiftable, as on the local stack."""
    index = BACKENDS.index(backend) + 1
    database_url = _database(request, backend, workdir, f"e2e_{backend}")
    redis_url = f"{redis_server}/{index}"
    (workdir / backend).mkdir(parents=True, exist_ok=True)
    # No rate limit: tests that need 429s inject them as faults.
    emulator = start_emulator(workdir / backend / "stripe-emulator.log", "--rate-limit", "0")
    env = stack_env(
        database_url=database_url,
        redis_url=redis_url,
        data_dir=workdir / backend,
        stripe_url=emulator.url,
        BILLING_SHIFTABLE_CLOCK="true",
    )
    system = Stack(
        name=backend,
        database_url=database_url,
        redis_url=redis_url,
        workdir=workdir / backend,
        env=env,
        stripe_url=emulator.url,
    )
    try:
        system.start_worker()
        system.start_api()
        system.client = system.new_client()
        yield system
    finally:
        system.stop()
        emulator.stop()


@pytest.fixture(scope="session")
def make_database(
    request: pytest.FixtureRequest, backend: str, workdir: Path
) -> Callable[[str], str]:
    """Make a new migrated database on ``backend``, named ``name``."""
    return lambda name: _database(request, backend, workdir, name)


@pytest.fixture(scope="session")
def fresh_database(request: pytest.FixtureRequest, backend: str, workdir: Path) -> str:
    """A migrated database on ``backend`` that no process of a stack uses."""
    return _database(request, backend, workdir, f"integration_{backend}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In a run in two processes (``python3 -m worker.dev test`` runs pytest-xdist with
    ``--dist loadgroup``): the tests of one database backend run in one process, in the
    order pytest gives them, so that the session's stack on that backend is set up once; any
    other test runs with the rest of its file (they share the file's fixtures).

    Not in effect with pytest 9.2 and pytest-xdist 3.8: xdist marks a test's group by
    rewriting ``item._nodeid``, which pytest 9.2 no longer reads (its node id is ``_id``), so
    every test goes to whichever process is free, and each process sets up the stack of each
    backend it runs tests of. The suite passes either way (two suites at once included)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend") if callspec is not None else None
        group = f"backend-{backend}" if backend else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(name=group))
