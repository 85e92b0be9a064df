"""A worker killed after Stripe created the customer and before we recorded it: the drift
report finds exactly that customer a day later, adoption links it, and the next report is
clean (real worker process, SIGKILL, the CLI as an operator runs it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from typing import Any

import pytest

from adapters.clock import SystemClock
from adapters.db.uow import SqlUnitOfWork
from domain.billing.accounts import BillingAccountState
from tests.chaos.conftest import StackFactory
from tests.support.environment import settings_environment
from tests.support.records import create_organization
from tests.support.stack import Stack, eventually

pytestmark = pytest.mark.chaos


def drift(stack: Stack, *flags: str) -> tuple[int, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "worker.cli", "stripe", "drift", "--json", *flags],
        env=settings_environment(stack.env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_a_customer_whose_registration_died_is_found_adopted_and_then_gone_from_the_report(
    make_stack: StackFactory,
) -> None:
    stack = make_stack({})
    stack.start_api()
    stack.client = stack.new_client()
    org = create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex}")
    with stack.stripe as stripe:
        # Stripe makes the customer, then the answer never comes: the worker dies waiting.
        stripe.add_fault(
            "hang", "POST /v1/customers", after_execution=True, hang_seconds=60, count=1
        )
        with stack.http() as http:
            response = http.post(
                f"/v1beta1/organizations/{org.id}/billing",
                json={"body": {"name": "Acme", "email": "billing@acme.example"}},
                headers={"Prefer": "respond-async"},
            )
        assert response.status_code == 202, response.text
        worker = stack.start_worker("doomed", concurrency=1)
        eventually(lambda: stripe.faults()[0].fired == 1, what="the customer being created")
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        stripe.clear_faults()
    with SqlUnitOfWork(stack.sessions) as uow:
        account = uow.billing_accounts.current_for_organization(org.id)
    assert account is not None
    assert (account.state, account.provider_id) == (BillingAccountState.PENDING, None)

    stack.advance_time(25 * 3600)  # past Stripe's memory of the idempotency key

    found_status, found = drift(stack)
    adopted_status, _ = drift(stack, "--adopt")
    again_status, again = drift(stack)

    assert found_status == 1
    [finding] = found
    assert finding["kind"] == "orphan_customer"
    assert account.id in json.dumps(finding)
    assert adopted_status == 0
    with SqlUnitOfWork(stack.sessions) as uow:
        linked = uow.billing_accounts.get(account.id)
    assert linked is not None
    assert linked.state is BillingAccountState.ACTIVE
    assert linked.provider_id is not None
    assert linked.provider_id in json.dumps(finding)
    assert (again_status, again) == (0, [])
