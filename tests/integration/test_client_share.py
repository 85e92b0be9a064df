"""Each client's share of new commands, on a real Redis: a burst, then the rate, per client
in all and per client and organization; the refusal is the spec's 429 with ``Retry-After``.
Each ``ClientShare`` stands for an API process: they share nothing but Redis."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from redis.asyncio import Redis

from domain.errors import ErrorCode
from worker.api.client_share import ClientShare
from worker.api.errors import ApiError


def test_a_client_gets_its_burst_then_a_429_saying_when_and_others_keep_theirs(
    redis_server: str,
) -> None:
    async def scenario() -> tuple[int, ApiError, int]:
        redis = Redis.from_url(f"{redis_server}/5")
        try:
            # Two API processes, one Redis: one token a minute in all, a burst of 3 on top.
            first, second = (
                ClientShare(redis, rate=0, burst=0, total_rate=1 / 60, total_burst=3)
                for _ in range(2)
            )
            busy, other = f"cli_{uuid.uuid4().hex}", f"cli_{uuid.uuid4().hex}"
            taken = 0
            for share in (first, second, first, second):
                await share.take(busy)
                taken += 1
            with pytest.raises(ApiError) as refused:
                await second.take(busy)
            others = 0
            for _ in range(4):
                await first.take(other)
                others += 1
            return taken, refused.value, others
        finally:
            await redis.aclose()

    taken, refusal, others = asyncio.run(scenario())

    assert taken == 4  # the first token and the burst
    assert (refusal.status, refusal.code) == (429, ErrorCode.RESOURCE_EXHAUSTED)
    assert 55 <= int(refusal.headers["Retry-After"]) <= 60
    assert refusal.details[0]["reason"] == "CLIENT_COMMAND_RATE_EXCEEDED"
    assert others == 4  # another client's share is its own


def test_a_rate_of_zero_is_no_limit(redis_server: str) -> None:
    async def scenario() -> None:
        redis = Redis.from_url(f"{redis_server}/5")
        try:
            share = ClientShare(redis, rate=0, burst=0, total_rate=0, total_burst=0)
            for _ in range(100):
                await share.take("cli_unlimited")
        finally:
            await redis.aclose()

    asyncio.run(scenario())


def test_a_client_s_share_is_counted_per_organization(redis_server: str) -> None:
    async def scenario() -> tuple[ApiError, int, int]:
        redis = Redis.from_url(f"{redis_server}/5")
        try:
            share = ClientShare(redis, rate=1 / 60, burst=1)
            client = f"cli_{uuid.uuid4().hex}"
            await share.take(client, "org_flooded")
            await share.take(client, "org_flooded")
            with pytest.raises(ApiError) as refused:
                await share.take(client, "org_flooded")
            elsewhere = 0
            for _ in range(2):  # the same client, for another organization
                await share.take(client, "org_other")
                elsewhere += 1
            unscoped = 0
            for _ in range(5):  # a command of no organization: no share per organization
                await share.take(client)
                unscoped += 1
            return refused.value, elsewhere, unscoped
        finally:
            await redis.aclose()

    refusal, elsewhere, unscoped = asyncio.run(scenario())

    assert refusal.status == 429
    assert "org_flooded" in refusal.message
    assert elsewhere == 2
    assert unscoped == 5


def test_a_client_s_ceiling_in_all_holds_whatever_the_organizations(redis_server: str) -> None:
    async def scenario() -> tuple[int, ApiError, int]:
        redis = Redis.from_url(f"{redis_server}/5")
        try:
            # Each organization's share is large; the ceiling in all is 4 commands at once.
            share = ClientShare(redis, rate=1, burst=20, total_rate=1 / 60, total_burst=3)
            client, other = f"cli_{uuid.uuid4().hex}", f"cli_{uuid.uuid4().hex}"
            taken = 0
            for number in range(4):
                await share.take(client, f"org_{number}")
                taken += 1
            with pytest.raises(ApiError) as refused:
                await share.take(client, "org_yet_another")
            others = 0
            for number in range(4):
                await share.take(other, f"org_{number}")
                others += 1
            return taken, refused.value, others
        finally:
            await redis.aclose()

    taken, refusal, others = asyncio.run(scenario())

    assert taken == 4
    assert refusal.status == 429
    assert "in all" in refusal.message
    assert others == 4


def test_a_refusal_by_one_share_takes_nothing_from_the_other(redis_server: str) -> None:
    async def scenario() -> int:
        redis = Redis.from_url(f"{redis_server}/5")
        try:
            # One command per organization; three in all.
            share = ClientShare(redis, rate=1 / 60, burst=0, total_rate=1 / 60, total_burst=2)
            client = f"cli_{uuid.uuid4().hex}"
            await share.take(client, "org_busy")
            for _ in range(5):  # refused for the organization: nothing taken in all
                with pytest.raises(ApiError):
                    await share.take(client, "org_busy")
            elsewhere = 0
            for number in range(2):
                await share.take(client, f"org_{number}")
                elsewhere += 1
            return elsewhere
        finally:
            await redis.aclose()

    assert asyncio.run(scenario()) == 2
