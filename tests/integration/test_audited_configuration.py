"""The actions on configuration are in the audit trail, run as an operator runs them (the
real ``billing-worker``, a process of its own), on SQLite and PostgreSQL: an API client's
secret rotated, a webhook endpoint added, disabled, enabled and its secret rotated, the local
stack's clock moved ahead and back. ``billing-worker audit`` lists each with who, why, what it
targeted and what it changed, and its ``operator.action_taken`` event is exported; neither
ever holds a secret. Those that need a reason are refused without one, in one line."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from adapters.db.engine import session_factory
from adapters.db.models import EventRow
from stripe_emulator import EmulatorAdmin
from tests.support.cli import Done, assert_refused_in_one_line, billing_worker
from tests.support.emulator import EmulatorProcess


@pytest.fixture
def env(make_database: Callable[[str], str], tmp_path: Path) -> dict[str, str]:
    return {
        "BILLING_DATABASE_URL": make_database(f"audited_{uuid.uuid4().hex[:8]}"),
        "BILLING_DATA_DIR": str(tmp_path),
    }


def ok(done: Done) -> str:
    assert done.status == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def audit(env: dict[str, str], *wanted: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(
        ok(billing_worker("audit", *wanted, "--json", env=env))
    )
    return found


def exported(env: dict[str, str]) -> list[dict[str, Any]]:
    """The documents of the ``operator.action_taken`` events, oldest first."""
    with session_factory(env["BILLING_DATABASE_URL"])() as session:
        rows = session.scalars(
            select(EventRow)
            .where(EventRow.type == "operator.action_taken")
            .order_by(EventRow.sequence)
        )
        return [dict(row.document) for row in rows]


def test_a_client_secret_rotated_is_listed_by_audit_with_who_and_why_never_the_secret(
    env: dict[str, str],
) -> None:
    created = json.loads(
        ok(billing_worker("clients", "create", "--name", "crm", "--json", env=env))
    )
    client_id = created["client_id"]

    refused = billing_worker("clients", "rotate-secret", client_id, env=env)
    rotated = json.loads(
        ok(
            billing_worker(
                "clients",
                "rotate-secret",
                client_id,
                "--reason",
                "pasted in a ticket",
                "--operator",
                "ann",
                "--json",
                env=env,
            )
        )
    )
    listed = ok(billing_worker("audit", "--target", client_id, env=env))

    assert_refused_in_one_line(refused, status=1, says="rotate-client-secret needs a reason")
    assert rotated["client_secret"] not in (created["client_secret"], "")
    [entry] = audit(env, "--target", client_id)
    assert (entry["action"], entry["operator"], entry["surface"]) == (
        "rotate-client-secret",
        "ann",
        "cli",
    )
    assert entry["reason"] == "pasted in a ticket"
    assert entry["targets"] == [f"api_client:{client_id}"]
    assert entry["changes"] == [
        f"client {client_id} has a new secret; the old one no longer authenticates"
    ]
    assert "rotate-client-secret" in listed
    assert "pasted in a ticket" in listed
    [event] = exported(env)
    assert event["command_id"] == entry["id"]
    for secret in (rotated["client_secret"], created["client_secret"]):
        assert secret not in listed + json.dumps(entry) + json.dumps(event)


def test_a_webhook_endpoint_added_disabled_enabled_and_rotated_is_listed_by_audit(
    env: dict[str, str],
) -> None:
    as_bob = {**env, "BILLING_OPERATOR": "bob"}
    added = json.loads(
        ok(
            billing_worker(
                "webhooks",
                "add",
                "https://hooks.example/crm",
                "--events",
                "command.failed",
                "--reason",
                "the CRM wants failures",
                "--json",
                env=as_bob,
            )
        )
    )
    endpoint_id = added["id"]
    ok(billing_worker("webhooks", "disable", endpoint_id, env=as_bob))
    ok(billing_worker("webhooks", "enable", endpoint_id, "--operator", "carol", env=as_bob))
    refused = billing_worker("webhooks", "rotate-secret", endpoint_id, env=as_bob)
    rotated = ok(
        billing_worker("webhooks", "rotate-secret", endpoint_id, "--reason", "leaked", env=as_bob)
    )
    new_secret = rotated.splitlines()[0].removeprefix("secret: ")

    assert_refused_in_one_line(refused, status=1, says="rotate-webhook-secret needs a reason")
    rotation, enabling, disabling, adding = audit(env, "--target", endpoint_id)
    assert [adding["action"], disabling["action"], enabling["action"], rotation["action"]] == [
        "add-webhook",
        "disable-webhook",
        "enable-webhook",
        "rotate-webhook-secret",
    ]
    assert [adding["operator"], disabling["operator"], enabling["operator"]] == [
        "bob",
        "bob",
        "carol",
    ]
    assert [adding["reason"], disabling["reason"], rotation["reason"]] == [
        "the CRM wants failures",
        "",
        "leaked",
    ]
    assert adding["targets"] == [f"webhook_endpoint:{endpoint_id}"]
    endpoint = f"webhook endpoint {endpoint_id} (https://hooks.example/crm)"
    assert adding["changes"] == [f"{endpoint} added, enabled, for command.failed"]
    assert disabling["changes"] == [
        f"{endpoint} disabled: disabled by an operator; 0 unfinished deliveries marked failed"
    ]
    assert enabling["changes"] == [f"{endpoint} enabled"]
    assert rotation["changes"][0].startswith(f"{endpoint} has a new secret; the old one signs")
    assert audit(env, "--action", "rotate-webhook-secret", "--operator", "bob") == [rotation]
    trail = json.dumps(audit(env)) + json.dumps(exported(env))
    assert [event["data"]["action"] for event in exported(env)] == [
        "add-webhook",
        "disable-webhook",
        "enable-webhook",
        "rotate-webhook-secret",
    ]
    assert added["secret"] not in trail
    assert new_secret.startswith("whsec_")
    assert new_secret not in trail


@pytest.fixture
def local_stack(
    env: dict[str, str], redis_server: str, emulator: EmulatorProcess
) -> Iterator[dict[str, str]]:
    """``env`` beside a running local stack's record (what ``up`` writes): its Redis, its
    Stripe emulator (this session's, its clock put back afterwards), its shiftable clock."""
    stack = {
        "shiftable_clock": True,
        "stripe_emulator_url": emulator.url,
        "redis_url": f"{redis_server}/13",
    }
    Path(env["BILLING_DATA_DIR"], "stack.json").write_text(json.dumps(stack))
    with EmulatorAdmin(emulator.url) as admin:
        admin.reset_clock()
        try:
            yield env
        finally:
            admin.reset_clock()


def test_the_clock_moved_ahead_and_back_is_listed_by_audit_with_how_far(
    local_stack: dict[str, str], emulator: EmulatorProcess
) -> None:
    env = local_stack
    refused = billing_worker("clock", "advance", "2d", env=env)
    advanced = ok(
        billing_worker(
            "clock", "advance", "2d", "--reason", "see the renewals", "--operator", "ann", env=env
        )
    )
    with EmulatorAdmin(emulator.url) as admin:
        emulator_offset = admin.clock()["offset"]
    back = ok(billing_worker("clock", "reset", "--reason", "renewals seen", env=env))

    assert_refused_in_one_line(refused, status=1, says="advance-clock needs a reason")
    assert advanced.startswith("advanced 2d; the clock is now 2.00 days ahead")
    assert 2 * 86_400 <= emulator_offset < 2 * 86_400 + 5
    assert back.strip() == "the clock is back to real time (it was 2.00 days ahead)"
    # Each entry is stamped on the application's clock, which the advance itself moved: which
    # of the two is listed first depends on whether its entry was stamped before or after.
    entries = {entry["action"]: entry for entry in audit(env, "--target", "clock:local")}
    advance, reset = entries["advance-clock"], entries["reset-clock"]
    assert (advance["action"], advance["operator"], advance["reason"]) == (
        "advance-clock",
        "ann",
        "see the renewals",
    )
    assert advance["targets"] == ["clock:local"]
    assert advance["changes"] == [advanced.strip()]
    assert (reset["action"], reset["reason"]) == ("reset-clock", "renewals seen")
    assert reset["changes"] == [back.strip()]
    assert [event["data"]["action"] for event in exported(env)] == ["advance-clock", "reset-clock"]
