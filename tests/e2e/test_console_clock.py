"""The console tells the truth about the clock, in Chromium on a stack of its own: after the
application's clock moves a month ahead (`clock advance 31d`), the home page shows the
shifted clock and marks no sweep stalled that ran a moment ago on real time, while a sweep
silent for longer than its intervals is still shown stalled. On SQLite and PostgreSQL."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from celery import Celery
from playwright.sync_api import Browser

from adapters.messaging.redis_clients import redis_client
from adapters.messaging.sweep_successes import SweepSuccesses
from application.requests.sweeps import PRUNE_COMMAND_LOG, REDRIVE_PENDING_ACCOUNTS
from domain.permissions import Grant, Scope
from tests.support.browser import chromium, chromium_path, watched_page
from tests.support.stack import Stack, eventually, stack_of_its_own
from worker.settings import Settings

pytestmark = pytest.mark.e2e

CLOCK_REDIS_DB = 5
DAY = 86_400
HOUR = 3_600


@pytest.fixture(scope="module")
def stack(
    backend: str, workdir: Path, redis_server: str, make_database: Callable[[str], str]
) -> Iterator[Stack]:
    """A stack of its own (its clock moves a month): an emulator, a worker and the API; no
    beat, so that a sweep runs only when a test sends it."""
    name = f"console_clock_{backend}"
    redis_url = f"{redis_server}/{CLOCK_REDIS_DB + (backend == 'postgresql')}"
    with stack_of_its_own(name, workdir, make_database(name), redis_url) as system:
        system.start_worker()
        system.start_api()
        system.client = system.new_client()
        yield system


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium(chromium_path()) as launched:
        yield launched


def run_sweep(stack: Stack, successes: SweepSuccesses, sweep: str) -> None:
    """Send ``sweep`` as beat would, and wait for the worker to record its success."""
    before = successes.read().get(sweep)
    publisher = Celery("beat-for-a-moment", broker=stack.redis_url)
    try:
        publisher.send_task(sweep, queue="maintenance")
    finally:
        publisher.close()
    eventually(
        lambda: (at := successes.read().get(sweep)) is not None and at != before,
        30,
        f"{sweep} to succeed in the worker",
    )


def test_after_the_clock_moves_a_month_no_sweep_that_just_ran_is_shown_stalled(
    stack: Stack, browser: Browser
) -> None:
    successes = SweepSuccesses(redis_client(Settings(redis_url=stack.redis_url)))
    run_sweep(stack, successes, PRUNE_COMMAND_LOG)  # every 5 min: a minute old is in time
    # Silent for a day on real time, four times its interval: stalled, whatever the clock.
    successes.record(REDRIVE_PENDING_ACCOUNTS, time.time() - DAY)
    stack.advance_time(31 * DAY)
    client = stack.new_client(
        f"console-{uuid.uuid4().hex[:6]}", Grant(scopes=frozenset({Scope.OPERATIONS_READ}))
    )

    with watched_page(browser, stack.api_url, (client.client_id, client.secret)) as watched:
        watched.page.goto("/console")
        clock = watched.page.locator(".clock").inner_text()
        ran = watched.page.locator("#sweeps tr", has_text=PRUNE_COMMAND_LOG).inner_text()
        silent = watched.page.locator("#sweeps tr", has_text=REDRIVE_PENDING_ACCOUNTS).inner_text()
        verdicts = watched.page.locator("#sweeps tbody tr td:last-child").all_inner_texts()

    assert ran.split()[-1] == "ok", ran
    assert silent.split()[-1] == "stalled", silent
    assert re.search(r"\b1d 0h", silent), silent  # a day ago on real time, not 32 days
    assert verdicts.count("stalled") == 1, verdicts
    assert "31.00 days ahead of real time" in clock  # the shifted clock, said to be so
    assert watched.problems == []
