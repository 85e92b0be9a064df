"""Nobody picks their own source, and nobody's guesses lock another out (issue 42), on real
API processes: one as `billing-worker up` runs it (no trusted proxy; every local caller comes
from 127.0.0.1, the address uvicorn used to believe ``X-Forwarded-For`` from), and one behind
the shipped ``deploy/nginx.conf`` (trusting nginx's address alone).

Every test sends from loopback addresses of its own (127.0.0.2, …: each a source), with
``X-Forwarded-For`` headers naming whoever it likes; the throttles' counts are emptied before
each test."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from adapters.db.migrate import upgrade
from tests.support.nginx import nginx, nginx_in_front_of
from tests.support.stack import Stack, stack_env
from tests.support.stripe_events import event, signature

pytestmark = pytest.mark.e2e

FAILURES_PER_SOURCE = 12
"""``BILLING_AUTH_MAX_FAILURES_PER_SOURCE`` here: over the (source, client id) limit, so that
both limits are seen, and under the default 30, so that the tests cost fewer hashes."""
FAILURES_PER_SOURCE_AND_CLIENT = 10  # BILLING_AUTH_MAX_FAILURES_PER_SOURCE_AND_CLIENT's default
FORGERIES_PER_SOURCE = 20  # BILLING_STRIPE_WEBHOOK_MAX_FAILURES_PER_SOURCE's default
STRIPE_ADDRESS = "203.0.113.7"
"""An address a forger names as its own, as one of Stripe's would be."""
DIRECT_REDIS_DB, PROXIED_REDIS_DB = 7, 8


@pytest.fixture(scope="module")
def database_url(workdir: Path) -> str:
    url = f"sqlite:///{workdir / 'spoofed_sources.db'}"
    upgrade(url)
    return url


def _api(
    name: str, workdir: Path, redis_url: str, database_url: str, **settings: str
) -> Iterator[Stack]:
    base = workdir / name
    base.mkdir(parents=True, exist_ok=True)
    env = stack_env(
        database_url=database_url,
        redis_url=redis_url,
        data_dir=base,
        # The limits as deployed (the test settings lift them: every test talks from
        # 127.0.0.1), and refusals sent at once rather than held a second.
        BILLING_AUTH_MAX_FAILURES_PER_SOURCE=str(FAILURES_PER_SOURCE),
        BILLING_STRIPE_WEBHOOK_MAX_FAILURES_PER_SOURCE=str(FORGERIES_PER_SOURCE),
        BILLING_AUTH_THROTTLED_HOLD_SECONDS="0",
        **settings,
    )
    system = Stack(name, database_url, redis_url, base, env)
    try:
        system.start_api()
        yield system
    finally:
        system.stop()


@pytest.fixture(scope="module")
def direct_api(workdir: Path, redis_server: str, database_url: str) -> Iterator[Stack]:
    """The API as `up` runs it: no trusted proxy."""
    yield from _api("api-direct", workdir, f"{redis_server}/{DIRECT_REDIS_DB}", database_url)


@pytest.fixture(scope="module")
def proxied_api(workdir: Path, redis_server: str, database_url: str) -> Iterator[str]:
    """The shipped nginx in front of an API that trusts nginx's address (127.0.0.1, where
    nginx connects from), as docker-compose runs them; nginx's URL."""
    nginx()  # skipped (before an API is started) where nginx is missing
    for api in _api(
        "api-proxied",
        workdir,
        f"{redis_server}/{PROXIED_REDIS_DB}",
        database_url,
        BILLING_API_TRUSTED_PROXIES="127.0.0.1",
        # What docker-compose used to set: uvicorn trusting every peer's header (and taking
        # its leftmost entry). The API's launch turns uvicorn's reading off, so it is moot.
        FORWARDED_ALLOW_IPS="*",
    ):
        with nginx_in_front_of(api.api_url, workdir / "nginx") as url:
            yield url


@pytest.fixture(autouse=True)
def no_failures_counted_yet(redis_server: str) -> None:
    for db in (DIRECT_REDIS_DB, PROXIED_REDIS_DB):
        redis.Redis.from_url(f"{redis_server}/{db}").flushdb()


def from_address(url: str, source: str) -> httpx.Client:
    """A client connecting from ``source`` (a loopback address: a source of its own)."""
    return httpx.Client(
        base_url=url, transport=httpx.HTTPTransport(local_address=source), timeout=30
    )


def wrong_secrets(
    url: str, source: str, count: int, forwarded_for: list[str] | None = None
) -> list[int]:
    """The statuses of ``count`` wrong secrets, each for a made-up client id, sent one after
    another from ``source``; the n-th with ``X-Forwarded-For: forwarded_for[n]`` if given."""
    statuses = []
    with from_address(url, source) as http:
        for n in range(count):
            headers = {"X-Forwarded-For": forwarded_for[n]} if forwarded_for else {}
            auth = (f"cli_{uuid.uuid4().hex[:16]}", "wrong")
            statuses.append(http.get("/v1beta1/commands/x", auth=auth, headers=headers).status_code)
    return statuses


def made_up_addresses(count: int) -> list[str]:
    return [f"198.51.100.{n + 1}" for n in range(count)]


def deliver(http: httpx.Client, body: bytes, stripe_signature: str, forwarded_for: str) -> int:
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "Stripe-Signature": stripe_signature,
        "X-Forwarded-For": forwarded_for,
    }
    return http.post("/webhooks/stripe", content=body, headers=headers).status_code


def forge(url: str, source: str, count: int, forwarded_for: str) -> list[int]:
    """``count`` deliveries signed with a secret we do not hold, from ``source``, naming
    ``forwarded_for`` as their sender."""
    body = json.dumps({"id": "evt_forged", "object": "event"}).encode()
    with from_address(url, source) as forger:
        return [
            deliver(forger, body, signature(body, "whsec_guessed"), forwarded_for)
            for _ in range(count)
        ]


def stripe_delivers(url: str, source: str, forwarded_for: str) -> int:
    """A delivery signed with a secret we hold (an event type we do not handle: answered
    200 without a worker)."""
    body = event("charge.refunded", {"id": "ch_1", "object": "charge"})
    with from_address(url, source) as stripe_side:
        return deliver(stripe_side, body, signature(body), forwarded_for)


HELD_BACK = [401] * FAILURES_PER_SOURCE + [429] * 3


def test_wrong_secrets_with_made_up_forwarded_addresses_are_held_back_after_as_many_as_without(
    direct_api: Stack,
) -> None:
    count = FAILURES_PER_SOURCE + 3
    plain = wrong_secrets(direct_api.api_url, "127.0.0.4", count)
    # From 127.0.0.1, where every local caller of `up` comes from.
    spoofed = wrong_secrets(direct_api.api_url, "127.0.0.1", count, made_up_addresses(count))

    assert plain == HELD_BACK
    assert spoofed == HELD_BACK


def test_a_signed_stripe_delivery_is_served_after_another_source_forged_some_in_its_name(
    direct_api: Stack,
) -> None:
    forged = forge(direct_api.api_url, "127.0.0.1", FORGERIES_PER_SOURCE + 1, STRIPE_ADDRESS)
    # Naming someone else does not free the forger either.
    forged += forge(direct_api.api_url, "127.0.0.1", 1, "198.51.100.9")
    delivered = stripe_delivers(direct_api.api_url, "127.0.0.3", STRIPE_ADDRESS)

    assert forged == [400] * FORGERIES_PER_SOURCE + [429, 429]
    assert delivered == 200


def test_an_idle_client_is_served_on_its_first_correct_request_while_others_guess_its_secret(
    direct_api: Stack,
) -> None:
    # Never verified: nothing cached lets it past the throttle.
    idle = direct_api.new_client(f"idle-{uuid.uuid4().hex[:6]}")
    guesses = {}
    for guesser in ("127.0.0.2", "127.0.0.5"):
        with from_address(direct_api.api_url, guesser) as http:
            guesses[guesser] = [
                http.get("/v1beta1/commands/x", auth=(idle.client_id, f"guess-{n}")).status_code
                for n in range(FAILURES_PER_SOURCE_AND_CLIENT + 1)
            ]
    with from_address(direct_api.api_url, "127.0.0.1") as http:
        first = http.get(f"/v1beta1/commands/{uuid.uuid4()}", auth=(idle.client_id, idle.secret))
    with from_address(direct_api.api_url, "127.0.0.2") as http:
        guessed_again = http.get("/v1beta1/commands/x", auth=(idle.client_id, "guess-again"))

    # Each guesser is held back for this client id (before its source's own limit)...
    held_back = [401] * FAILURES_PER_SOURCE_AND_CLIENT + [429]
    assert guesses == {"127.0.0.2": held_back, "127.0.0.5": held_back}
    assert guessed_again.status_code == 429
    # ...and the client, from its own address, is served: 404, the command is unknown.
    assert first.status_code == 404, first.text


def test_behind_the_shipped_nginx_made_up_forwarded_addresses_are_held_back_and_nobody_else(
    proxied_api: str,
) -> None:
    count = FAILURES_PER_SOURCE + 3
    spoofed = wrong_secrets(proxied_api, "127.0.0.2", count, made_up_addresses(count))
    # Another caller behind the same nginx keeps its own count (nginx's address is not one
    # source for all).
    other = wrong_secrets(proxied_api, "127.0.0.3", 1, made_up_addresses(1))

    assert spoofed == HELD_BACK
    assert other == [401]


def test_behind_the_shipped_nginx_a_signed_stripe_delivery_is_served_after_forgeries_in_its_name(
    proxied_api: str,
) -> None:
    forged = forge(proxied_api, "127.0.0.2", FORGERIES_PER_SOURCE + 1, STRIPE_ADDRESS)
    delivered = stripe_delivers(proxied_api, "127.0.0.3", STRIPE_ADDRESS)

    assert forged == [400] * FORGERIES_PER_SOURCE + [429]
    assert delivered == 200
