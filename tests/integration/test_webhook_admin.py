"""``billing-worker webhooks``, run as an operator would (a process of its own), on SQLite and
PostgreSQL: endpoints added, listed, disabled (their unfinished deliveries failed with the
reason), enabled, their secrets rotated, and failed deliveries listed and replayed. A secret is
printed by ``add`` and ``rotate-secret`` only."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from adapters.clock import SystemClock
from adapters.db.engine import session_factory
from adapters.db.uow import SqlUnitOfWork
from domain.webhooks import DeliveryState, WebhookDelivery
from tests.support.cli import Done, billing_worker


@dataclass(frozen=True)
class Operator:
    url: str
    data_dir: Path

    def env(self, **settings: str) -> dict[str, str]:
        return {
            "BILLING_DATABASE_URL": self.url,
            "BILLING_DATA_DIR": str(self.data_dir),
            **settings,
        }


@pytest.fixture
def database(make_database: Callable[[str], str], tmp_path: Path) -> Operator:
    return Operator(make_database(f"webhooks_{uuid.uuid4().hex[:8]}"), tmp_path)


def run(database: Operator, *args: str) -> Done:
    done = billing_worker(*args, env=database.env())
    assert done.status == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done


def run_json(database: Operator, *args: str) -> Any:
    return json.loads(run(database, *args, "--json").stdout)


def add_deliveries(
    sessions: sessionmaker[Session], endpoint_id: str, *states: DeliveryState
) -> list[str]:
    """Deliveries of as many events to the endpoint, in these states (as the relay and the
    delivery task would have left them)."""
    now = SystemClock().now()
    made = []
    with SqlUnitOfWork(sessions) as uow:
        for sequence, state in enumerate(states, start=1):
            delivery = WebhookDelivery.of(
                f"evt_{uuid.uuid4().hex}",
                "user.enabled",
                sequence,
                f"user:usr_{sequence}",
                endpoint_id,
                now - timedelta(minutes=10 - sequence),
            )
            delivery.state = state
            if state is DeliveryState.FAILED:
                delivery.attempts = 3
                delivery.first_attempt_at = now - timedelta(days=1)
                delivery.last_status = 500
                delivery.last_error = "HTTP 500"
            uow.webhook_deliveries.add(delivery)
            made.append(delivery.id)
        uow.commit()
    return made


def delivery(sessions: sessionmaker[Session], delivery_id: str) -> WebhookDelivery:
    with SqlUnitOfWork(sessions) as uow:
        found = uow.webhook_deliveries.get(delivery_id)
    assert found is not None
    return found


def test_an_endpoint_is_added_with_its_secret_shown_once_and_listed_without_it(
    database: Operator,
) -> None:
    added = run(
        database,
        "webhooks",
        "add",
        "https://hooks.example/billing",
        "--events",
        "user.enabled,command.failed",
        "--events",
        "billing_account.created",
        "--description",
        "crm",
    )
    every = run_json(database, "webhooks", "add", "https://hooks.example/all")

    lines = dict(line.split(":", 1) for line in added.stdout.splitlines() if ": " in line)
    endpoint_id, secret = lines["id"].strip(), lines["secret"].strip()
    assert secret.startswith("whsec_")
    assert "shown once" in added.stdout
    assert every["events"] == ["*"]
    assert every["secret"].startswith("whsec_")

    table = run(database, "webhooks", "list").stdout
    listed = run_json(database, "webhooks", "list")
    shown = run_json(database, "webhooks", "show", endpoint_id)

    assert table.splitlines()[0].split() == ["ID", "STATE", "URL", "EVENTS", "DISABLED", "BECAUSE"]
    assert f"{endpoint_id}  enabled" in table
    assert "user.enabled,command.failed,billing_account.created" in table
    assert [e["id"] for e in listed] == [endpoint_id, every["id"]]
    assert shown["description"] == "crm"
    for output in (table, json.dumps(listed), json.dumps(shown)):
        assert secret not in output
        assert every["secret"] not in output
        assert "whsec_" not in output


def test_disabling_fails_the_unfinished_deliveries_which_replay_once_it_is_enabled(
    database: Operator,
) -> None:
    sessions = session_factory(database.url)
    endpoint_id = run_json(database, "webhooks", "add", "https://hooks.example/x")["id"]
    pending, delivering, succeeded = add_deliveries(
        sessions,
        endpoint_id,
        DeliveryState.PENDING,
        DeliveryState.DELIVERING,
        DeliveryState.SUCCEEDED,
    )

    disabled = run(database, "webhooks", "disable", endpoint_id, "--reason", "receiver moved")
    table = run(database, "webhooks", "list").stdout
    failed = run_json(database, "webhooks", "deliveries", "--failed", "--endpoint", endpoint_id)
    refused = billing_worker("webhooks", "replay", pending, env=database.env())

    assert disabled.stdout.strip() == (
        f"{endpoint_id} disabled: receiver moved; 2 unfinished deliveries marked failed"
    )
    assert "disabled  https://hooks.example/x  *       receiver moved" in table
    assert {d["id"] for d in failed} == {pending, delivering}
    assert {d["last_error"] for d in failed} == {"endpoint disabled: receiver moved"}
    assert delivery(sessions, succeeded).state is DeliveryState.SUCCEEDED
    assert refused.status == 1
    assert refused.stderr.splitlines() == [
        f"Error: endpoint '{endpoint_id}' is disabled (receiver moved); enable it before "
        f"replaying delivery '{pending}'"
    ]
    assert delivery(sessions, pending).state is DeliveryState.FAILED

    run(database, "webhooks", "enable", endpoint_id)
    replayed = run(database, "webhooks", "replay", pending)
    everything = run(database, "webhooks", "replay", "--endpoint", endpoint_id, "--failed")

    assert replayed.stdout == f"replayed {pending}\n"
    assert everything.stdout == f"replayed 1 failed deliveries of {endpoint_id}\n"
    for delivery_id in (pending, delivering):
        again = delivery(sessions, delivery_id)
        assert again.state is DeliveryState.PENDING
        assert (again.attempts, again.first_attempt_at) == (0, None)
    assert run_json(database, "webhooks", "deliveries", "--failed") == []


def test_deliveries_are_listed_by_state_endpoint_and_event(database: Operator) -> None:
    sessions = session_factory(database.url)
    first = run_json(database, "webhooks", "add", "https://one.example/x")["id"]
    second = run_json(database, "webhooks", "add", "https://two.example/x")["id"]
    old_failure, _ = add_deliveries(sessions, first, DeliveryState.FAILED, DeliveryState.SUCCEEDED)
    (other_failure,) = add_deliveries(sessions, second, DeliveryState.FAILED)
    event_id = delivery(sessions, old_failure).event_id

    table = run(database, "webhooks", "deliveries", "--failed").stdout
    of_first = run_json(database, "webhooks", "deliveries", "--endpoint", first)
    of_event = run_json(database, "webhooks", "deliveries", "--event", event_id)
    one = run_json(database, "webhooks", "deliveries", "--state", "failed", "--limit", "1")

    assert table.splitlines()[0].split()[:3] == ["ID", "STATE", "ENDPOINT"]
    assert f"{old_failure}  failed" in table
    assert "HTTP 500" in table
    assert len(table.splitlines()) == 3
    assert [d["endpoint_id"] for d in of_first] == [first, first]
    assert [d["id"] for d in of_event] == [old_failure]
    assert [d["id"] for d in one] == [other_failure]  # newest first


def test_a_rotated_secret_is_printed_once_and_the_old_one_signs_for_the_grace(
    database: Operator,
) -> None:
    added = run_json(database, "webhooks", "add", "https://hooks.example/x")

    rotated = billing_worker(
        "webhooks",
        "rotate-secret",
        added["id"],
        "--reason",
        "shown in a log",
        env=database.env(BILLING_WEBHOOK_SECRET_GRACE_SECONDS="7200"),
    )

    assert rotated.status == 0, rotated.stderr
    new_secret = rotated.stdout.splitlines()[0].removeprefix("secret: ")
    assert new_secret.startswith("whsec_")
    assert new_secret != added["secret"]
    assert "the old secret keeps signing for 2 hours, until " in rotated.stdout
    with SqlUnitOfWork(session_factory(database.url)) as uow:
        endpoint = uow.webhook_endpoints.get(added["id"])
    assert endpoint is not None
    assert endpoint.signing_secrets(SystemClock().now()) == [new_secret, added["secret"]]
    assert "whsec_" not in run(database, "webhooks", "list", "--json").stdout
