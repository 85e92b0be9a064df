"""The organizations a command sent over HTTP may name (``worker/api/organizations.py``): a
made-up id is the spec's 404, never remembered; an organization found is remembered for a
while; and one client's reads of ids not remembered wait in a line of their own."""

from __future__ import annotations

import asyncio
import threading

import pytest

from domain.errors import NotFound
from worker.api.errors import ApiError
from worker.api.organizations import (
    FREE_REFUSALS_PER_MINUTE,
    LOOKUPS_PER_CLIENT,
    KnownOrganizations,
)


class Directory:
    """The organizations that exist, counting its reads; a read of an id in ``held`` waits
    until ``release`` is set (a slow database, for one client's ids)."""

    def __init__(self, *org_ids: str) -> None:
        self.org_ids = set(org_ids)
        self.reads: list[str] = []
        self.held: set[str] = set()
        self.in_flight = 0
        self.most_in_flight = 0
        self.release = threading.Event()
        self._lock = threading.Lock()

    def exists(self, org_id: str) -> bool:
        with self._lock:
            self.reads.append(org_id)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if org_id in self.held:
                self.release.wait(30)
            return org_id in self.org_ids
        finally:
            with self._lock:
                self.in_flight -= 1


def test_a_made_up_organization_is_the_spec_s_404_naming_it_and_is_never_remembered() -> None:
    directory = Directory("org_real")
    known = KnownOrganizations(directory)

    async def twice() -> list[ApiError]:
        refusals = []
        for _ in range(2):
            with pytest.raises(ApiError) as refused:
                await known.check("cli_a", "org_made_up")
            refusals.append(refused.value)
        return refusals

    refusals = asyncio.run(twice())

    expected = NotFound.resource("organization", "org_made_up")
    for refusal in refusals:
        assert refusal.status == 404
        assert (refusal.code, refusal.message, refusal.details) == (
            expected.code,
            expected.message,
            expected.details,
        )
    assert directory.reads == ["org_made_up", "org_made_up"]


def test_an_organization_found_is_answered_from_memory_until_it_is_forgotten() -> None:
    directory = Directory("org_real")
    now = [0.0]
    known = KnownOrganizations(directory, remember_seconds=300, clock=lambda: now[0])

    async def checks() -> None:
        await known.check("cli_a", "org_real")
        now[0] = 299.0
        await known.check("cli_b", "org_real")  # remembered, whoever asks
        now[0] = 300.0
        await known.check("cli_a", "org_real")  # forgotten: read again

    asyncio.run(checks())

    assert directory.reads == ["org_real", "org_real"]


def test_one_client_s_made_up_ids_are_read_a_few_at_a_time_and_never_hold_up_another_client() -> (
    None
):
    flood = [f"org_made_up_{number}" for number in range(10)]
    directory = Directory("org_real")
    directory.held = set(flood)
    known = KnownOrganizations(directory)

    async def scenario() -> tuple[int, int]:
        async def refused(org_id: str) -> int:
            try:
                await known.check("cli_flooder", org_id)
            except ApiError as error:
                return error.status
            return 200

        flooding = [asyncio.create_task(refused(org_id)) for org_id in flood]
        while directory.in_flight < LOOKUPS_PER_CLIENT:
            await asyncio.sleep(0.01)
        # The flooder's reads are stuck; another client's is not behind them.
        await known.check("cli_other", "org_real")
        reads_while_stuck = len(directory.reads)
        directory.release.set()
        statuses = await asyncio.gather(*flooding)
        assert set(statuses) == {404}
        return reads_while_stuck, directory.most_in_flight

    reads_while_stuck, most_in_flight = asyncio.run(scenario())

    assert reads_while_stuck == LOOKUPS_PER_CLIENT + 1  # the flooder's turns, and the other's
    assert most_in_flight == LOOKUPS_PER_CLIENT + 1


def test_a_client_s_refusals_past_its_free_ones_in_a_minute_are_held_and_another_s_are_not() -> (
    None
):
    directory = Directory("org_real")
    now = [0.0]
    held: list[str] = []
    holding: list[str] = []

    async def hold() -> None:
        held.append(holding[-1])

    known = KnownOrganizations(directory, clock=lambda: now[0], hold_refusal=hold)

    async def refuse(client_id: str, count: int) -> None:
        for number in range(count):
            holding.append(client_id)
            with pytest.raises(ApiError):
                await known.check(client_id, f"org_made_up_{number}")

    asyncio.run(refuse("cli_flooder", FREE_REFUSALS_PER_MINUTE + 5))
    asyncio.run(refuse("cli_typo", 1))
    now[0] = 60.0  # a new minute: the flooder's free refusals again
    asyncio.run(refuse("cli_flooder", 1))

    assert held == ["cli_flooder"] * 5
