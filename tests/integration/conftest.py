"""Fixtures for the integration tests: one Stripe emulator for the session, reset per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.provider.stripe_adapter import StripeBillingProvider
from stripe_emulator import EmulatorAdmin
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
