"""The API's verifications of client secrets on real parts: a real ``ClientAuthenticator``
(argon2id against the database) and the shared throttle in a real Redis. A valid client is
never refused for its own requests: a burst joins one attempt, and a verification being
refreshed ahead of its end is waited for without asking Redis."""

from __future__ import annotations

import asyncio
import socket
import uuid

import pytest
from prometheus_client import REGISTRY
from redis.asyncio import Redis
from sqlalchemy import text

from adapters.clock import SystemClock
from adapters.db.api_clients import ClientAuthenticator, create_client
from adapters.db.engine import session_factory
from domain.permissions import Grant
from tests.support.stack import eventually
from worker.api.shared_throttle import SharedFailures
from worker.api.verifications import Verifications


def slow_verifications(reason: str) -> float:
    """This process's slow verifications so far, for ``reason``."""
    return sum(
        REGISTRY.get_sample_value(
            "billing_api_client_verifications_total", {"reason": reason, "outcome": outcome}
        )
        or 0.0
        for outcome in ("valid", "invalid", "error")
    )


def limits(redis: Redis) -> tuple[SharedFailures, SharedFailures]:
    """The settings' defaults: 10 failures per client id, 30 per source."""
    return SharedFailures(redis, "client", 10, 60.0), SharedFailures(redis, "source", 30, 60.0)


def test_a_client_s_forty_requests_sent_at_once_join_one_attempt_and_none_is_refused(
    fresh_database: str, redis_server: str
) -> None:
    sessions = session_factory(fresh_database)
    client = create_client(sessions, SystemClock(), f"burst-{uuid.uuid4().hex[:6]}")
    authenticator = ClientAuthenticator(sessions, ttl=60, max_concurrent_hashes=1)
    source = f"10.7.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}"
    before = slow_verifications("request")

    async def scenario() -> list[Grant | BaseException | None]:
        redis = Redis.from_url(f"{redis_server}/6")
        try:
            verifications = Verifications(authenticator, *limits(redis))
            # All forty ask before any answer from Redis: more than the client id's limit
            # of attempts at once, were each of them an attempt of its own.
            return await asyncio.gather(
                *(verifications.verify(client.client_id, client.secret, source) for _ in range(40)),
                return_exceptions=True,
            )
        finally:
            await redis.aclose()

    answers = asyncio.run(scenario())

    assert [a for a in answers if not isinstance(a, Grant)] == []
    assert slow_verifications("request") - before == 1


TTL = 6.0
"""Long enough for the first verification to end before it does, on a loaded machine."""


def test_a_request_past_the_end_of_a_verification_being_refreshed_waits_for_it_not_for_redis(
    backend: str, fresh_database: str
) -> None:
    if backend != "postgresql":
        pytest.skip("the refresh is held by a PostgreSQL table lock (SQLite's WAL reads on)")
    sessions = session_factory(fresh_database)
    client = create_client(sessions, SystemClock(), f"busy-{uuid.uuid4().hex[:6]}")
    authenticator = ClientAuthenticator(sessions, ttl=TTL)
    credentials = (client.client_id, client.secret)
    assert authenticator.verify(*credentials)

    async def scenario(silent: socket.socket) -> list[Grant | BaseException | None]:
        # A Redis that accepts connections and never answers: any question to it shows as a
        # connection waiting on this socket.
        redis = Redis.from_url(f"redis://127.0.0.1:{silent.getsockname()[1]}/0")
        try:
            verifications = Verifications(authenticator, *limits(redis))
            with sessions() as holder:
                # The refresh, begun past half the verification's life, waits for the lock.
                holder.execute(text("LOCK TABLE api_clients IN ACCESS EXCLUSIVE MODE"))
                eventually(
                    lambda: (
                        authenticator.cached(*credentials) is not None
                        and authenticator.refreshing(*credentials)
                    ),
                    what="a refresh under way",
                )
                eventually(
                    lambda: authenticator.cached(*credentials) is None, what="the end of the TTL"
                )
                requests = [
                    asyncio.create_task(verifications.verify(*credentials, "10.8.0.1"))
                    for _ in range(5)
                ]
                await asyncio.sleep(0)  # each request runs up to what it waits for
                holder.rollback()  # the lock goes: the refresh ends
            return await asyncio.gather(*requests, return_exceptions=True)
        finally:
            await redis.aclose()

    with socket.create_server(("127.0.0.1", 0)) as silent:
        answers = asyncio.run(scenario(silent))
        silent.setblocking(False)
        with pytest.raises(BlockingIOError):
            silent.accept()[0].close()  # no connection came: Redis was never asked

    assert [a for a in answers if not isinstance(a, Grant)] == []
