"""Chaos fixtures: stacks of their own (database, Stripe emulator, Redis database), so that
workers can be killed without disturbing other tests."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.support.emulator import start_emulator
from tests.support.netns import remove_stale
from tests.support.stack import Stack, stack_env

CHAOS_REDIS_DB = 9
"""Redis databases 9 (SQLite) and 10 (PostgreSQL); the shared stacks use 1 and 2."""

StackFactory = Callable[[dict[str, str]], Stack]


@pytest.fixture(scope="session", autouse=True)
def no_stale_partitions() -> None:
    """Network namespaces and veth pairs a killed session left (tests/support/netns.py) are
    removed before any test: a leftover keeps its addresses taken and its names in use."""
    remove_stale()


@pytest.fixture
def make_stack(
    backend: str, workdir: Path, redis_server: str, make_database: Callable[[str], str]
) -> Iterator[StackFactory]:
    """A stack of its own (database, emulator, Redis database) without workers yet."""
    started: list[tuple[Stack, Callable[[], object]]] = []

    def make(settings: dict[str, str]) -> Stack:
        name = f"chaos_{uuid.uuid4().hex[:8]}"
        base = workdir / name
        base.mkdir(parents=True)
        emulator = start_emulator(base / "stripe-emulator.log", "--rate-limit", "0")
        database_url = make_database(name)
        redis_url = f"{redis_server}/{CHAOS_REDIS_DB + (backend == 'postgresql')}"
        redis.Redis.from_url(redis_url).flushdb()  # no messages or clock left by another test
        env = stack_env(
            database_url=database_url,
            redis_url=redis_url,
            data_dir=base,
            stripe_url=emulator.url,
            BILLING_SHIFTABLE_CLOCK="true",
            **settings,
        )
        stack = Stack(
            name=name,
            database_url=database_url,
            redis_url=redis_url,
            workdir=base,
            env=env,
            stripe_url=emulator.url,
        )
        started.append((stack, emulator.stop))
        return stack

    yield make
    for stack, stop_emulator in reversed(started):
        stack.stop()
        stop_emulator()
