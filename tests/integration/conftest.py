"""Fixtures for the integration tests: one Stripe emulator for the session, reset per test."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from adapters.provider.stripe_adapter import StripeBillingProvider
from stripe_emulator import EmulatorAdmin
from tests.support.drift_world import World, drift_world
from tests.support.emulator import EMULATOR_KEY, EmulatorProcess, start_emulator


@pytest.fixture(scope="session")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorProcess]:
    log = tmp_path_factory.mktemp("integration-stripe") / "emulator.log"
    process = start_emulator(log, "--rate-limit", "0")
    yield process
    process.stop()


@pytest.fixture
def admin(emulator: EmulatorProcess) -> Iterator[EmulatorAdmin]:
    """The emulator's admin API, on an emulator reset for this test."""
    with EmulatorAdmin(emulator.url) as client:
        client.reset()
        yield client


@pytest.fixture
def provider(emulator: EmulatorProcess, admin: EmulatorAdmin) -> StripeBillingProvider:
    return StripeBillingProvider(EMULATOR_KEY, api_base=emulator.url, timeout=3)


@pytest.fixture
def world(
    make_database: Callable[[str], str],
    emulator: EmulatorProcess,
    admin: EmulatorAdmin,
    redis_server: str,
    tmp_path: Path,
) -> World:
    """A drift test's world (``tests/support/drift_world.py``) on this test's database."""
    return drift_world(
        make_database(f"drift_{uuid.uuid4().hex[:8]}"), emulator, admin, redis_server, tmp_path
    )
