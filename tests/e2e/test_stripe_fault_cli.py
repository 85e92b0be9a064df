"""`billing-worker stripe fault add|list|clear` on the stack's real Stripe emulator: the
console how-to's failure → replay recipe as an operator runs it (a fault makes a
registration fail, the home page shows the failed command, a replay after `clear` registers
the account at the emulator), and bad input as one line and a non-zero exit. On SQLite and
PostgreSQL."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest
import stripe  # noqa: TID251 - the test looks at the emulator's customers through the SDK

from adapters.clock import SystemClock
from domain.permissions import Grant, Scope
from stripe_emulator import EmulatorAdmin
from tests.support.cli import Done, billing_worker
from tests.support.records import create_organization
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

ACCOUNT = {"body": {"name": "Acme Ltd", "email": "billing@acme.example"}}


def fault(stack: Stack, *args: str) -> Done:
    return billing_worker("stripe", "fault", *args, env=stack.env)


def test_a_fault_added_from_the_command_line_fails_a_registration_which_a_replay_completes(
    stack: Stack, emulator: EmulatorAdmin, sdk: stripe.StripeClient
) -> None:
    org = create_organization(stack.sessions, SystemClock(), name=f"flt-{uuid.uuid4().hex[:8]}")
    added = fault(stack, "add", "service_unavailable", "--match", "POST /v1/customers", "--json")
    assert added.status == 0, added.stderr
    rule = json.loads(added.stdout)
    try:
        with stack.http() as api:
            failed = api.post(f"/v1beta1/organizations/{org.id}/billing", json=ACCOUNT)
        listed = fault(stack, "list")
    finally:
        cleared = fault(stack, "clear", rule["id"])
    command_id = failed.headers["Command-Id"]
    operator = stack.new_client(
        f"faults-{uuid.uuid4().hex[:6]}",
        Grant(scopes=frozenset({Scope.OPERATIONS_READ, Scope.OPERATIONS_WRITE})),
    )
    home = httpx.get(
        f"{stack.api_url}/console", auth=(operator.client_id, operator.secret), timeout=30
    )
    replayed = billing_worker(
        "commands", "replay", command_id, "--reason", "the fault is cleared", env=stack.env
    )

    assert (rule["kind"], rule["match"], rule["count"]) == (
        "service_unavailable",
        "POST /v1/customers",
        None,
    )
    assert failed.status_code == 503, failed.text
    [row] = [line for line in listed.stdout.splitlines() if line.startswith(rule["id"])]
    assert row.split()[1:3] == ["service_unavailable", "POST"]
    assert int(row.split()[4]) >= 1  # FIRED: once per attempt of the registration
    assert cleared.stdout.strip() == f"fault {rule['id']} cleared"
    assert emulator.faults() == []
    assert command_id in home.text.split('id="failed"', 1)[1]  # the home page's failures
    assert replayed.status == 0, replayed.stderr
    assert stack.finished(command_id).status.value == "succeeded"
    found = sdk.v1.customers.search(params={"query": f"metadata['org_id']:'{org.id}'"})
    assert len(found.data) == 1  # registered at Stripe once, by the replay


@pytest.mark.parametrize(
    ("args", "status", "said"),
    [
        (("add", "nope"), 2, "'nope' is not a fault kind; one of rate_limit, lock_timeout"),
        (("add", "latency"), 2, "a latency fault needs latency_ms > 0"),
        (("add", "card_declined", "--after-execution"), 2, "cannot act after execution"),
        (("add", "rate_limit", "--replays"), 2, "a rate_limit fault cannot act on replays"),
        (("add", "api_error", "--count", "0"), 2, "Invalid value for '--count'"),
        (("clear", "flt_none"), 1, "no fault flt_none"),
    ],
)
def test_a_fault_the_emulator_cannot_hold_is_refused_in_one_line_and_none_is_added(
    stack: Stack, emulator: EmulatorAdmin, args: tuple[str, ...], status: int, said: str
) -> None:
    done = fault(stack, *args)

    assert done.status == status
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert said in done.stderr
    assert "Traceback" not in done.stderr
    assert emulator.faults() == []


def test_without_an_emulator_the_fault_commands_say_so_in_one_line(tmp_path: Path) -> None:
    nowhere = billing_worker("stripe", "fault", "list", env={"BILLING_DATA_DIR": str(tmp_path)})
    gone = billing_worker(
        "stripe",
        "fault",
        "list",
        env={"BILLING_DATA_DIR": str(tmp_path), "BILLING_STRIPE_API_BASE": "http://127.0.0.1:9"},
    )

    assert nowhere.status == 1
    assert nowhere.stderr.strip().splitlines() == [
        "Error: faults are the Stripe emulator's: no emulator here (start the local stack with "
        "`billing-worker up`, or set BILLING_STRIPE_API_BASE to an emulator's URL)"
    ]
    assert gone.status == 3
    assert gone.stderr.startswith("Error: the Stripe emulator is unreachable at http://127.0.0.1:9")


def test_a_fault_on_replays_too_is_added_and_listed_as_such(
    stack: Stack, emulator: EmulatorAdmin
) -> None:
    added = fault(stack, "add", "drop", "--replays", "--count", "1", "--json")
    try:
        listed = fault(stack, "list")
    finally:
        emulator.clear_faults()

    assert added.status == 0, added.stderr
    rule = json.loads(added.stdout)
    assert (rule["kind"], rule["replays"], rule["count"]) == ("drop", True, 1)
    [row] = [line for line in listed.stdout.splitlines() if line.startswith(rule["id"])]
    assert "idempotent replays too" in row
