"""Every recorded Stripe call belongs to the command that made it (issue 29, row 7): an
account creation retrying on Stripe's faults while beat's reconciliation sweep re-reads other
organizations' customers in the same worker process. Real worker (one pool process, so the
sweep runs where the retrying command ran), the Stripe emulator, SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from adapters.clock import SystemClock
from application.requests.sweeps import RECONCILE_WITH_STRIPE
from stripe_emulator import EmulatorAdmin
from tests.support.records import create_organization
from tests.support.stack import Stack, eventually, stack_of_its_own

pytestmark = pytest.mark.e2e

OWNERSHIP_REDIS_DB = 13
"""Redis databases 13 (SQLite) and 14 (PostgreSQL)."""
ACCOUNT = {"name": "Acme Ltd", "email": "billing@acme.example"}


@pytest.fixture(scope="module")
def stack(
    backend: str, workdir: Path, redis_server: str, make_database: Callable[[str], str]
) -> Iterator[Stack]:
    """One worker with one pool process, and retries slow enough for a sweep to run between
    two attempts of a command."""
    name = f"owned_calls_{backend}"
    redis_url = f"{redis_server}/{OWNERSHIP_REDIS_DB + (backend == 'postgresql')}"
    with stack_of_its_own(
        name,
        workdir,
        make_database(name),
        redis_url,
        BILLING_RETRY_MAX_ATTEMPTS="30",
        BILLING_RETRY_BASE_DELAY_SECONDS="0.5",
        BILLING_RETRY_MAX_DELAY_SECONDS="1",
    ) as system:
        system.start_worker(concurrency=1)
        yield system


@pytest.fixture
def publisher(stack: Stack) -> Iterator[Celery]:
    app = Celery("another-service", broker=stack.redis_url)
    app.conf.update(task_serializer="json", accept_content=["json"])
    yield app
    app.close()


def cli(stack: Stack, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "worker.cli", *args],
        env={**os.environ, **stack.env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def create_account(publisher: Celery, org_id: str) -> str:
    command_id = f"create-{uuid.uuid4().hex[:12]}"
    publisher.send_task(
        "billing.create_account",
        queue="billing",
        kwargs={"command_id": command_id, "org_id": org_id, "account": ACCOUNT},
    )
    return command_id


def test_a_sweep_between_two_attempts_of_a_command_records_none_of_its_calls_under_it(
    stack: Stack, publisher: Celery
) -> None:
    clock = SystemClock()
    others = [
        create_organization(stack.sessions, clock, name=f"other-{uuid.uuid4().hex[:8]}")
        for _ in range(2)
    ]
    for other in others:
        assert stack.finished(create_account(publisher, other.id)).status.value == "succeeded"
    org = create_organization(stack.sessions, clock, name=f"retrying-{uuid.uuid4().hex[:8]}")
    admin = EmulatorAdmin(stack.stripe_url)
    try:
        admin.add_fault("service_unavailable", "POST /v1/customers")
        command_id = create_account(publisher, org.id)
        eventually(
            lambda: (
                stack.command(command_id).attempts >= 1
                if stack.commands.get(command_id) is not None
                else None
            ),
            30,
            "the creation's first attempt to fail",
        )
        # Beat's sweep, in the pool process whose last run was the command's failed attempt.
        publisher.send_task(RECONCILE_WITH_STRIPE, queue="maintenance")
        others_synced = eventually(
            lambda: (
                all(
                    account.synced_at is not None
                    for other in others
                    if (account := _account_of(stack, other.id)) is not None
                )
                or None
            ),
            30,
            "the sweep to re-read the other organizations' customers",
        )
        assert others_synced
        admin.clear_faults()  # Stripe is back: the next attempt registers the account
        assert stack.finished(command_id, timeout=60).status.value == "succeeded"
    finally:
        admin.clear_faults()
        admin.close()

    story = cli(stack, "accounts", "show", org.id, "--json")
    account_id = story["billing_account"]["id"]
    calls = story["provider_calls"]
    assert calls, "the creation's own calls are recorded"
    assert {call["command_id"] for call in calls} == {command_id}
    assert {call["subject"] for call in calls} == {f"billing_account:{account_id}"}
    for other in others:
        other_story = cli(stack, "accounts", "show", other.id, "--json")
        assert {call["command_id"] for call in other_story["provider_calls"]} <= {
            command["id"] for command in other_story["commands"]
        }


def _account_of(stack: Stack, org_id: str) -> Any:
    from adapters.db.uow import SqlUnitOfWork

    with SqlUnitOfWork(stack.sessions) as uow:
        return uow.billing_accounts.current_for_organization(org_id)
