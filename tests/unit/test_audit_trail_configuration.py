"""The audit trail of the actions on configuration, on in-memory ports: rotating an API
client's secret, adding, disabling, enabling a webhook endpoint and rotating its secret,
moving the local stack's clock. Each is taken through the table's ``take`` and leaves one
entry and its ``operator.action_taken`` event, written once it is done, that never hold a
secret; those that need a reason are refused without one, and change nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from application.operator_actions import LOCAL_CLOCK, Surface, action, take
from domain.errors import FailedPrecondition, InvalidArgument, NotFound
from domain.operations.audit import AuditEntry, AuditFilter
from tests.support.fakes.application import FakeApplication, FakeStackClock

DAY = 86_400.0


def entries(app: FakeApplication, **wanted: Any) -> list[AuditEntry]:
    with app.unit_of_work() as uow:
        return uow.audit.find(AuditFilter(**wanted), 100)


def exported(app: FakeApplication) -> list[dict[str, Any]]:
    rows = sorted(app.db.rows("events"), key=lambda row: row.sequence)
    return [row.document for row in rows if row.document["type"] == "operator.action_taken"]


def added_endpoint(app: FakeApplication, reason: str = "") -> Any:
    return take(
        action("add-webhook"),
        app,
        ["https://hooks.example/billing"],
        reason,
        by="ann",
        surface=Surface.CLI,
        options={"events": ["command.failed"], "description": "the CRM"},
    )


def test_a_client_secret_rotated_is_audited_without_the_secret() -> None:
    app = FakeApplication()
    app.client_secrets["cli_crm"] = "old"

    rotated = take(
        action("rotate-client-secret"),
        app,
        ["cli_crm"],
        "pasted in a ticket",
        by="ann",
        surface=Surface.CLI,
    )

    assert app.client_secrets["cli_crm"] == rotated.secret != "old"
    [entry] = entries(app)
    assert (entry.action, entry.operator, entry.surface) == ("rotate-client-secret", "ann", "cli")
    assert entry.reason == "pasted in a ticket"
    assert entry.targets == ["api_client:cli_crm"]
    assert entry.billing_account_id is None
    assert entry.changes == ["client cli_crm has a new secret; the old one no longer authenticates"]
    [event] = exported(app)
    assert event["data"]["targets"] == ["api_client:cli_crm"]
    assert rotated.secret not in json.dumps(event)
    assert rotated.secret not in entry.model_dump_json()


def test_a_client_secret_is_not_rotated_without_a_reason() -> None:
    app = FakeApplication()
    app.client_secrets["cli_crm"] = "old"

    with pytest.raises(InvalidArgument, match="rotate-client-secret needs a reason"):
        take(action("rotate-client-secret"), app, ["cli_crm"], " ", by="ann", surface=Surface.CLI)

    assert app.client_secrets["cli_crm"] == "old"
    assert entries(app) == []


def test_an_unknown_clients_rotation_is_refused_and_writes_no_entry() -> None:
    app = FakeApplication()

    with pytest.raises(NotFound):
        take(action("rotate-client-secret"), app, ["cli_nope"], "why", by="a", surface=Surface.CLI)

    assert entries(app) == []


def test_an_endpoint_added_is_audited_under_its_new_id_without_its_secret() -> None:
    app = FakeApplication()

    added = added_endpoint(app, "the CRM wants failures")

    [entry] = entries(app, target=added.endpoint.id)
    assert entry.action == "add-webhook"
    assert entry.reason == "the CRM wants failures"
    assert entry.targets == [f"webhook_endpoint:{added.endpoint.id}"]
    assert entry.changes == [
        f"webhook endpoint {added.endpoint.id} (https://hooks.example/billing) added, enabled, "
        "for command.failed"
    ]
    assert added.secret not in json.dumps(exported(app))


def test_an_endpoint_is_added_disabled_and_enabled_without_a_reason_each_audited() -> None:
    app = FakeApplication()
    added = added_endpoint(app)
    endpoint_id = added.endpoint.id

    take(action("disable-webhook"), app, [endpoint_id], "", by="ops", surface=Surface.API)
    take(action("enable-webhook"), app, [endpoint_id], "", by="ops", surface=Surface.API)

    enabled, disabled, first = entries(app, target=endpoint_id)
    assert [first.action, disabled.action, enabled.action] == [
        "add-webhook",
        "disable-webhook",
        "enable-webhook",
    ]
    assert (disabled.operator, disabled.surface, disabled.reason) == ("ops", "api", "")
    assert disabled.changes == [
        f"webhook endpoint {endpoint_id} (https://hooks.example/billing) disabled: disabled by "
        "an operator; 0 unfinished deliveries marked failed"
    ]
    assert enabled.changes == [
        f"webhook endpoint {endpoint_id} (https://hooks.example/billing) enabled"
    ]


def test_an_endpoints_disabling_reason_is_kept_with_it_and_in_the_audit_trail() -> None:
    app = FakeApplication()
    endpoint_id = added_endpoint(app).endpoint.id

    take(
        action("disable-webhook"), app, [endpoint_id], "receiver moved", by="o", surface=Surface.CLI
    )

    assert app.db.row("webhook_endpoints", endpoint_id).disabled_reason == "receiver moved"
    [entry] = entries(app, action="disable-webhook")
    assert entry.reason == "receiver moved"


def test_an_endpoints_secret_rotated_is_audited_with_its_grace_never_the_secret() -> None:
    app = FakeApplication()
    endpoint_id = added_endpoint(app).endpoint.id

    rotated = take(
        action("rotate-webhook-secret"),
        app,
        [endpoint_id],
        "leaked",
        by="ann",
        surface=Surface.CLI,
        options={"grace_seconds": 3600},
    )

    [entry] = entries(app, action="rotate-webhook-secret")
    assert rotated.previous_valid_until == app.clock.now() + timedelta(hours=1)
    assert entry.targets == [f"webhook_endpoint:{endpoint_id}"]
    assert entry.changes == [
        f"webhook endpoint {endpoint_id} (https://hooks.example/billing) has a new secret; "
        f"the old one signs until {rotated.previous_valid_until:%Y-%m-%d %H:%M:%S} UTC"
    ]
    assert rotated.secret not in json.dumps(exported(app))


def test_an_endpoints_secret_is_not_rotated_without_a_reason() -> None:
    app = FakeApplication()
    added = added_endpoint(app)

    with pytest.raises(InvalidArgument, match="rotate-webhook-secret needs a reason"):
        take(
            action("rotate-webhook-secret"),
            app,
            [added.endpoint.id],
            "",
            by="ann",
            surface=Surface.API,
        )

    assert app.db.row("webhook_endpoints", added.endpoint.id).secret == added.secret
    assert [entry.action for entry in entries(app)] == ["add-webhook"]


def test_the_clock_moved_ahead_and_back_is_audited_with_how_far() -> None:
    app = FakeApplication()
    app.local_clock = FakeStackClock()
    advance, reset = action("advance-clock"), action("reset-clock")

    moved = take(
        advance,
        app,
        [LOCAL_CLOCK],
        "see the renewals",
        by="ann",
        surface=Surface.CLI,
        options={"seconds": 31 * DAY, "duration": "31d"},
    )
    back = take(reset, app, [LOCAL_CLOCK], "done", by="ann", surface=Surface.CLI)

    assert (moved.offset, back.offset, app.local_clock.offset()) == (31 * DAY, 0.0, 0.0)
    second, first = entries(app, target="clock:local")
    assert (first.action, first.reason) == ("advance-clock", "see the renewals")
    assert first.changes == [
        "advanced 31d; the clock is now 31.00 days ahead (it was 0.00 days ahead)"
    ]
    assert (second.action, second.changes) == (
        "reset-clock",
        ["the clock is back to real time (it was 31.00 days ahead)"],
    )
    assert [event["data"]["action"] for event in exported(app)] == ["advance-clock", "reset-clock"]


def test_the_clock_does_not_move_without_a_reason_nor_without_a_local_stack() -> None:
    app = FakeApplication()
    options = {"seconds": DAY, "duration": "1d"}

    with pytest.raises(FailedPrecondition):
        take(
            action("advance-clock"),
            app,
            [LOCAL_CLOCK],
            "why",
            by="a",
            surface=Surface.CLI,
            options=options,
        )
    app.local_clock = FakeStackClock()
    with pytest.raises(InvalidArgument, match="advance-clock needs a reason"):
        take(
            action("advance-clock"),
            app,
            [LOCAL_CLOCK],
            "",
            by="a",
            surface=Surface.CLI,
            options=options,
        )

    assert app.local_clock.offset() == 0.0
    assert entries(app) == []


def test_an_endpoint_is_disabled_with_as_long_a_reason_as_its_handler_keeps() -> None:
    from application.handlers.events.webhook_endpoints import MAX_REASON

    app = FakeApplication()
    endpoint_id = added_endpoint(app).endpoint.id
    disable = action("disable-webhook")

    with pytest.raises(InvalidArgument, match=f"at most {MAX_REASON} characters"):
        take(disable, app, [endpoint_id], "x" * (MAX_REASON + 1), by="o", surface=Surface.API)
    take(disable, app, [endpoint_id], "x" * MAX_REASON, by="o", surface=Surface.API)

    assert disable.max_reason == MAX_REASON
    assert app.db.row("webhook_endpoints", endpoint_id).disabled_reason == "x" * MAX_REASON
