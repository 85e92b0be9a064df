"""Session fixtures: real Redis, real SQLite and PostgreSQL, real worker and API processes.

Every test that takes ``stack`` runs once per database backend. In CI (``CI=true``) a
PostgreSQL that cannot be started fails the run instead of skipping.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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


def test_group(nodeid: str) -> str:
    """The group a test runs in, in a run in two processes: its database backend's (every
    test of one backend in one process, in the order pytest gives them, so that the
    session's stack on that backend is set up once), or else its file's (a file's tests share
    the file's fixtures)."""
    path, _, name = nodeid.partition("::")
    parameters = name[name.find("[") + 1 : -1].split("-") if name.endswith("]") else []
    backend = next((each for each in BACKENDS if each in parameters), None)
    return f"backend-{backend}" if backend else path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` (``python3 -m worker.dev test``) with our groups
    (:func:`test_group`), read from each test's node id. pytest-xdist's own groups
    (``xdist_group`` marks) are not used: it marks a test's group by rewriting
    ``item._nodeid``, which pytest 9 no longer reads, so they would have no effect."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class ByBackendThenFile(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return test_group(nodeid)

    return ByBackendThenFile(config, log)
