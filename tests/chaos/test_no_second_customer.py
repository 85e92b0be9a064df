"""A worker killed while Stripe is creating the customer: the command is redelivered, and the
retry (same idempotency key) gets the first customer back instead of making a second."""

from __future__ import annotations

import os
import signal
import uuid

import pytest

from adapters.clock import SystemClock
from tests.chaos.conftest import StackFactory
from tests.support.records import create_organization
from tests.support.stack import Stack, eventually

pytestmark = pytest.mark.chaos


@pytest.fixture
def stack_with_stripe(make_stack: StackFactory) -> Stack:
    stack = make_stack({"BILLING_BROKER_VISIBILITY_TIMEOUT_SECONDS": "4"})
    stack.start_api()
    stack.client = stack.new_client()
    return stack


def test_a_worker_killed_while_stripe_creates_the_customer_leaves_one_customer(
    stack_with_stripe: Stack,
) -> None:
    stack = stack_with_stripe
    org = create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex}")
    with stack.stripe as stripe:
        # Stripe writes the customer, then answers nothing for a few seconds.
        stripe.add_fault(
            "hang", "POST /v1/customers", after_execution=True, hang_seconds=3, count=1
        )
        with stack.http() as http:
            response = http.post(
                f"/v1beta1/organizations/{org.id}/billing",
                json={"body": {"name": "Acme", "email": "billing@acme.example"}},
                headers={"Prefer": "respond-async"},
            )
        assert response.status_code == 202, response.text
        command_id = response.json()["command_id"]

        first = stack.start_worker("first", concurrency=1)
        eventually(
            lambda: stripe.faults()[0].fired == 1, what="the customer creation to be under way"
        )
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        stack.start_worker("second", concurrency=1)

        record = stack.finished(command_id, timeout=40)
        assert record.status.value == "succeeded", record.error
        assert record.result is not None
        account = record.result["billing_account"]
        posts = [
            logged
            for logged in stripe.requests(path_prefix="/v1/customers", method="POST")
            if logged.form.get("metadata", {}).get("billing_account_id") == account["id"]
        ]
        executed = [logged for logged in posts if not logged.replayed]
        assert len(executed) == 1
        assert len({logged.idempotency_key for logged in posts}) == 1
        assert account["state"] == "active"
