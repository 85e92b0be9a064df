"""Fixtures for the Stripe emulator tests.

One emulator process serves the whole session (rate limit off; tests about the limiter turn it
on through the admin API) and is reset before every test.

``stripe_client`` is parametrized: ``emulator`` always runs; ``stripe`` runs the same contract
test against real Stripe test mode when ``STRIPE_TEST_API_KEY`` is set, and is reported as
skipped otherwise. Tests that only make sense against the emulator (faults, clock, admin API,
wire-level details) use ``emulator_client`` and carry the ``emulator_only`` marker.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin
from tests.emulator.support import (
    SECOND_KEY,
    EmulatorProcess,
    StripeTarget,
    real_stripe_key,
    sdk_client,
    start_emulator,
)
from tests.emulator.webhook_support import Hook, Receiver, register


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "emulator_only: exercises emulator-only features (admin API, faults, clock)"
    )


@pytest.fixture(scope="session")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorProcess]:
    log_path = tmp_path_factory.mktemp("stripe-emulator") / "emulator.log"
    process = start_emulator(log_path, "--rate-limit", "0", "--extra-api-key", SECOND_KEY)
    yield process
    process.stop()


@pytest.fixture(scope="session")
def admin(emulator: EmulatorProcess) -> Iterator[EmulatorAdmin]:
    with EmulatorAdmin(emulator.url) as client:
        yield client


@pytest.fixture(autouse=True)
def _fresh_emulator(admin: EmulatorAdmin) -> None:
    admin.reset()


@pytest.fixture
def emulator_client(emulator: EmulatorProcess) -> stripe.StripeClient:
    return sdk_client(emulator.url)


@pytest.fixture(params=["emulator", pytest.param("stripe", marks=pytest.mark.stripe_live)])
def stripe_target(
    request: pytest.FixtureRequest, emulator: EmulatorProcess, admin: EmulatorAdmin
) -> Iterator[StripeTarget]:
    if request.param == "emulator":
        yield StripeTarget("emulator", sdk_client(emulator.url), admin)
        return
    key = real_stripe_key()
    if key is None:
        pytest.skip("set STRIPE_TEST_API_KEY to run the contract tests against real Stripe")
    target = StripeTarget("stripe", stripe.StripeClient(key, max_network_retries=2), None)
    try:
        yield target
    finally:
        target.cleanup()


@pytest.fixture
def stripe_client(stripe_target: StripeTarget) -> stripe.StripeClient:
    return stripe_target.client


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A webhook receiver: an HTTP server in the test process."""
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def hook(receiver: Receiver, emulator_client: stripe.StripeClient, admin: EmulatorAdmin) -> Hook:
    """``receiver`` registered with the emulator for every event type (``*``); short retries."""
    admin.set_retry_schedule([0.2, 0.2])
    return register(receiver, emulator_client, admin)
