"""The story of an account is complete on the command line as in the console: `accounts show
ORG` tells its subscriptions, their plan changes (with their lag), the `plan_change.*` events
and the invoices Stripe made, with their lines, read from the emulator through the real SDK.
On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.support.stack import Stack
from tests.support.stack import cli_output as cli
from tests.support.subscriptions import new_account, new_plan, operator, subscribe

pytestmark = pytest.mark.e2e


def test_an_accounts_story_tells_its_subscriptions_changes_events_and_invoices(
    stack: Stack,
) -> None:
    ctx = operator(stack)
    suffix = uuid.uuid4().hex[:8]
    starter, team = new_plan(ctx, f"starter-{suffix}", 1000), new_plan(ctx, f"team-{suffix}", 4900)
    account = new_account(ctx)
    subscribed = subscribe(ctx, account, starter)
    with stack.http() as api:
        changed = api.post(
            subscribed.change_url, json={"plan_change": {"plan": team.name, "immediate": True}}
        )
        assert changed.status_code < 300, changed.text
        scheduled = api.post(subscribed.change_url, json={"plan_change": {"plan": starter.name}})
        assert scheduled.status_code < 300, scheduled.text

    story = json.loads(cli(stack, "accounts", "show", account.org_id, "--json"))
    text = cli(stack, "accounts", "show", account.org_id)

    [subscription] = story["subscriptions"]
    assert subscription["subscription"]["id"] == subscribed.id
    assert subscription["subscription"]["plan_id"] == team.id
    assert [(c["from_plan_id"], c["plan_id"], c["state"]) for c in subscription["changes"]] == [
        (team.id, starter.id, "scheduled"),  # at the period's end, newest first
        (starter.id, team.id, "applied"),
    ]
    event_types = {event["type"] for event in subscription["events"]}
    assert "subscription.plan_change.scheduled" in event_types
    assert "subscription.plan_changed" in event_types
    invoices = subscription["invoices"]
    assert invoices, subscription["invoices_error"]
    first = invoices[-1]  # newest first: the oldest is the subscription's first month
    assert first["amount_due"] == 1000
    assert [line["amount"] for line in first["lines"]] == [1000]
    upcoming = subscription["next_invoice"]
    assert upcoming is not None, subscription["next_invoice_error"]
    assert upcoming["id"].startswith("upcoming_in_")
    assert upcoming["lines"]
    assert f"subscription {subscribed.id}" in text
    assert "next invoice" in text
    assert "plan changes" in text
    assert "invoice lines" in text
    assert first["id"] in text
    assert "10.00 USD" in text  # in the currency's units, as the console shows them
    assert "1000 usd" not in text
    assert "subscription.plan_change.scheduled" in text  # the merged timeline has them too
