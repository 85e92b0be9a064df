"""The rate limiter: Stripe's test-mode 25 requests/s by default, adjustable, 0 = off."""

from __future__ import annotations

import time

import httpx
import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin
from tests.emulator.support import EmulatorProcess, running_emulator, sdk_client

pytestmark = pytest.mark.emulator_only


def _burst(client: stripe.StripeClient, count: int) -> list[str]:
    outcomes = []
    for _ in range(count):
        try:
            client.v1.customers.list(params={"limit": 1})
            outcomes.append("ok")
        except stripe.RateLimitError as error:
            outcomes.append(str(error.error.code if error.error else "no error body"))
    return outcomes


def test_requests_beyond_the_limit_get_429_rate_limit(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.set_rate_limit(5)

    outcomes = _burst(emulator_client, 8)

    assert outcomes[:5] == ["ok"] * 5
    assert "rate_limit" in outcomes[5:]
    limited = [r for r in admin.requests("/v1/customers") if r.status == 429]
    assert limited
    assert all(r.fault == "rate_limiter" for r in limited)


def test_the_limit_refills_over_a_second(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.set_rate_limit(4)
    _burst(emulator_client, 6)

    time.sleep(0.6)

    assert _burst(emulator_client, 2) == ["ok", "ok"]


def test_a_rate_limit_of_zero_turns_the_limiter_off(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.set_rate_limit(0)

    assert set(_burst(emulator_client, 60)) == {"ok"}
    assert admin.rate_limit() == 0


def test_the_admin_api_is_never_rate_limited(
    emulator: EmulatorProcess, admin: EmulatorAdmin
) -> None:
    admin.set_rate_limit(1)

    statuses = {httpx.get(f"{emulator.url}/_emulator/health").status_code for _ in range(10)}

    assert statuses == {200}


def test_by_default_the_limit_is_stripes_test_mode_25_per_second(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with running_emulator(tmp_path_factory.mktemp("default") / "emulator.log") as emulator:
        with EmulatorAdmin(emulator.url) as admin:
            limit = admin.rate_limit()
        outcomes = _burst(sdk_client(emulator.url), 40)

    assert limit == 25
    assert outcomes.count("ok") < 40
    assert outcomes[:25] == ["ok"] * 25


def test_reads_and_writes_are_limited_separately_as_stripe_counts_them(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.set_rate_limit(3)
    assert _burst(emulator_client, 3) == ["ok"] * 3  # the reads are used up

    created = emulator_client.v1.customers.create(params={"name": "a write"})

    assert created.id.startswith("cus_")
    assert "rate_limit" in _burst(emulator_client, 1)
