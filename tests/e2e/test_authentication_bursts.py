"""Valid clients under load, on a real API process: a new client's burst is one verification
and never refused, a busy client's verification is refreshed before it ends, guesses sent at
once cannot overrun the failure limit, and another source's flood of wrong secrets does not
hold back a new client's first request."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.stack import Stack, eventually, stack_env

pytestmark = pytest.mark.e2e

CACHE_SECONDS = 5.0


@pytest.fixture(scope="module")
def auth_api(
    backend: str,
    workdir: Path,
    redis_server: str,
    make_database: Callable[[str], str],
) -> Iterator[Stack]:
    """An API process of its own (no worker: ``GET /v1beta1/commands/{id}`` of an unknown id
    answers 404 from the database once the client is authenticated), with a short cache and
    one hash at a time, so that the order of hashes is what the tests see."""
    database_url = make_database(f"auth_bursts_{backend}")
    base = workdir / f"auth-bursts-{backend}"
    base.mkdir(parents=True, exist_ok=True)
    env = stack_env(
        database_url=database_url,
        redis_url=f"{redis_server}/15",
        data_dir=base,
        BILLING_AUTH_CACHE_SECONDS=str(CACHE_SECONDS),
        BILLING_AUTH_MAX_CONCURRENT_HASHES="1",
    )
    system = Stack(f"auth-{backend}", database_url, f"{redis_server}/15", base, env)
    try:
        system.start_api()
        yield system
    finally:
        system.stop()


def verifications(stack: Stack) -> Counter[tuple[str, str]]:
    """The API's slow verifications so far, by (reason, outcome)."""
    text = httpx.get(f"{stack.api_url}/metrics", timeout=10).text
    return Counter(
        {
            (sample.labels["reason"], sample.labels["outcome"]): int(sample.value)
            for family in text_string_to_metric_families(text)
            if family.name == "billing_api_client_verifications"
            for sample in family.samples
            if sample.name.endswith("_total")
        }
    )


def get_unknown_command(http: httpx.Client) -> int:
    return http.get(f"/v1beta1/commands/{uuid.uuid4()}").status_code


def burst(stack: Stack, credentials: list[tuple[str, str]], source: str = "127.0.0.1") -> list[int]:
    """One request per credentials, all sent at once from ``source``, each on a connection
    of its own."""
    ready = threading.Barrier(len(credentials))

    def send(auth: tuple[str, str]) -> int:
        transport = httpx.HTTPTransport(local_address=source)
        with httpx.Client(
            base_url=stack.api_url, auth=auth, timeout=60, transport=transport
        ) as http:
            ready.wait()
            return get_unknown_command(http)

    with ThreadPoolExecutor(len(credentials)) as pool:
        return list(pool.map(send, credentials))


def test_twenty_parallel_requests_of_a_new_client_all_succeed_on_one_verification(
    auth_api: Stack,
) -> None:
    client = auth_api.new_client(f"bursty-{uuid.uuid4().hex[:6]}")
    before = verifications(auth_api)

    statuses = burst(auth_api, [(client.client_id, client.secret)] * 20)

    assert statuses == [404] * 20  # authenticated, and the command is unknown
    assert verifications(auth_api) - before == Counter({("request", "valid"): 1})


def test_wrong_secrets_sent_at_once_are_hashed_no_more_than_the_failure_limit(
    auth_api: Stack,
) -> None:
    victim = auth_api.new_client(f"guessed-{uuid.uuid4().hex[:6]}")
    before = verifications(auth_api)

    # From a source of its own: the other tests' sources keep a clean record.
    guesses = [(victim.client_id, f"guess-{n}") for n in range(20)]
    statuses = burst(auth_api, guesses, source="127.0.0.3")

    # BILLING_AUTH_MAX_FAILURES_PER_SOURCE_AND_CLIENT (10) guesses verified and failed; the rest
    # refused without a hash.
    assert Counter(statuses) == Counter({401: 10, 429: 10})
    assert verifications(auth_api) - before == Counter({("request", "invalid"): 10})


def test_a_busy_client_never_sees_a_429_and_its_verification_is_refreshed_before_it_ends(
    auth_api: Stack,
) -> None:
    client = auth_api.new_client(f"busy-{uuid.uuid4().hex[:6]}")
    with auth_api.http(client) as http:
        assert get_unknown_command(http) == 404
    warmed = verifications(auth_api)
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    # The load lasts two and a half lifetimes of a verification: two of them end under it.
    until = time.monotonic() + 2.5 * CACHE_SECONDS

    def busy() -> None:
        with auth_api.http(client) as http:
            while time.monotonic() < until:
                status = get_unknown_command(http)
                with lock:
                    statuses[status] += 1

    with ThreadPoolExecutor(20) as pool:
        for done in [pool.submit(busy) for _ in range(20)]:
            done.result()

    assert set(statuses) == {404}, statuses
    # Every request after the first was answered from a verification refreshed ahead of its
    # end (once each half lifetime): none of them had to wait for a hash.
    since_warmed = verifications(auth_api) - warmed
    assert since_warmed[("request", "valid")] == 0
    assert since_warmed[("refresh", "valid")] >= 2


def test_another_source_s_flood_of_wrong_secrets_does_not_hold_back_a_new_client(
    auth_api: Stack,
) -> None:
    """The flood comes from 127.0.0.2 and keeps 24 wrong secrets waiting for the one hashing
    thread; the new client (from 127.0.0.1, a source without failures) waits for the hash
    under way, not for the flood's queue."""
    client = auth_api.new_client(f"fresh-{uuid.uuid4().hex[:6]}")
    answered = itertools.count()
    flood_answers: list[int] = []
    stop = threading.Event()

    def attacker() -> None:
        transport = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(base_url=auth_api.api_url, transport=transport, timeout=60) as http:
            while not stop.is_set():
                auth = (f"cli_{uuid.uuid4().hex[:16]}", "wrong")
                status = http.get("/v1beta1/commands/x", auth=auth).status_code
                assert status == 401
                flood_answers.append(next(answered))

    with ThreadPoolExecutor(24) as pool:
        attackers = [pool.submit(attacker) for _ in range(24)]
        try:
            eventually(lambda: len(flood_answers) >= 24 or None, timeout=120)
            with auth_api.http(client) as http:
                sent_after = len(flood_answers)
                status = get_unknown_command(http)
                overtaken_by = len(flood_answers) - sent_after
        finally:
            stop.set()
        for done in attackers:
            done.result()

    assert status == 404
    # The hash under way when it arrived, and an answer in transit then.
    assert overtaken_by <= 2, overtaken_by
