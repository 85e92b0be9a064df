"""A year of the command log, with what each command left beside it: its provider calls, its
events in the outbox and their webhook deliveries (``seed`` loads them; ``rows`` has the
accounts and subscriptions they name).

Commands come oldest first, one every ``YEAR / commands`` seconds on average; each is drawn
from the seed alone, so two seeds of one size hold the same history.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from tests.benchmarks.scale.rows import (
    CLIENTS,
    ENDPOINTS,
    MONTH,
    PLANS,
    YEAR,
    Row,
    Size,
    Stamp,
    _hex,
    _uuid,
    account_id,
    org_id,
    subscription_id,
    user_id,
)

REJECTED = (
    '{"code": 3, "message": "subscription \'%s\' is already on plan \'%s\'", "details": '
    '[{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{"field": '
    '"plan", "description": "is the current plan"}]}]}'
)
FAILED = (
    '{"code": 14, "message": "the billing provider was unavailable for the whole retry budget", '
    '"details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": '
    '"PROVIDER_UNAVAILABLE", "domain": "billing-worker"}]}'
)


@dataclass
class Written:
    """One command's rows, table by table."""

    command: Row
    provider_calls: list[Row] = field(default_factory=list)
    events: list[Row] = field(default_factory=list)
    webhook_deliveries: list[Row] = field(default_factory=list)


@dataclass
class History:
    size: Size
    stamp: Stamp
    rng: random.Random
    _call: int = 0
    _event: int = 0

    def __iter__(self) -> Iterator[Written]:
        total = self.size.commands
        for i in range(total):
            yield self._command(YEAR * (1 - i / total) - self.rng.random() * 0.5)

    def _command(self, ago: float) -> Written:
        rng, stamp = self.rng, self.stamp
        command_id = _uuid(rng)
        kind, status = rng.random(), rng.random()
        outcome = "succeeded" if status < 0.975 else "rejected" if status < 0.99 else "failed"
        org = rng.randrange(self.size.organizations)
        api = rng.random() < 0.7
        retried = outcome != "rejected" and rng.random() < 0.04
        took = 0.02 + rng.random() * 0.3 + (2.5 if retried else 0)
        finished = ago - took
        written = Written(())
        subject: str | None = None
        calls: tuple[str, ...] = ()
        events: tuple[tuple[str, str, str], ...] = ()
        if kind < 0.5:
            task, target = "users.enable", user_id(org)
            payload = f'{{"command_id": "{command_id}", "user_id": "{target}"}}'
            result = f'{{"user_id": "{target}", "was_already_enabled": false}}'
            events = (("user.enabled", f"user:{target}", f'{{"user_id": "{target}"}}'),)
        elif kind < 0.9:
            sub, plan = subscription_id(org), PLANS[(org + 1) % 3]
            change = f"chg_{_hex(rng, 32)}"
            subject = f"provider_subscription:sub_stripe{org:09d}"
            data = (
                f'{{"change_id": "{change}", "subscription_id": "{sub}", '
                f'"target_plan_id": "{plan[0]}", "state": "applied"}}'
            )
            common = (
                f'"command_id": "{command_id}", "org_id": "{org_id(org)}", '
                f'"billing_account_id": "{account_id(org)}", "subscription_id": "{sub}"'
            )
            if kind < 0.7:
                task = "subscriptions.change_plan"
                payload = f'{{"version": 1, {common}, "plan": "{plan[1]}", "immediate": true}}'
                calls = ("change_subscription_price",)
                events = (("subscription.plan_changed", f"subscription:{sub}", data),)
            elif kind < 0.8:
                task = "subscriptions.preview_plan_change"
                payload = f'{{"version": 1, {common}, "plan": "{plan[1]}"}}'
                calls = ("get_subscription", "preview_change")
            else:
                task = "subscriptions.apply_scheduled_change"
                payload = f'{{"command_id": "{command_id}", "change_id": "{change}", {common}}}'
                calls = ("change_subscription_price",)
                events = (("subscription.plan_change.applied", f"subscription:{sub}", data),)
            result = f'{{"subscription_id": "{sub}", "plan_id": "{plan[0]}", "amount_due": 2000}}'
        elif kind < 0.97:
            task, account = "billing.create_account", account_id(org)
            subject = f"billing_account:{account}"
            payload = (
                f'{{"version": 1, "command_id": "{command_id}", "org_id": "{org_id(org)}", '
                f'"billing_account_id": "{account}", "account": {{"name": "Organization {org} '
                f'Ltd", "email": "billing{org}@scale.example", "currency": null, "tax_data": '
                f'[], "metadata": {{}}}}, "offline": false}}'
            )
            result = f'{{"billing_account": {{"id": "{account}", "state": "active"}}}}'
            calls = ("create_customer",)
            data = f'{{"billing_account_id": "{account}", "org_id": "{org_id(org)}"}}'
            events = (
                ("billing_account.created", subject, data),
                ("billing_account.registered", subject, data),
            )
        else:
            task, subject = "stripe.sync_object", f"provider_subscription:sub_stripe{org:09d}"
            payload = f'{{"command_id": "{command_id}", "object": "subscription", "id": "sub_stripe{org:09d}"}}'  # noqa: E501
            result = '{"synced": true}'
            calls = ("get_subscription",)
        error = None
        if outcome == "rejected":
            result, calls, events = "null", (), ()
            error = REJECTED % (subscription_id(org), PLANS[org % 3][1])
            events = (("command.rejected", f"command:{command_id}", "{}"),)
        elif outcome == "failed":
            result, error = "null", FAILED
            events = (("command.failed", f"command:{command_id}", "{}"),)
        attempts = 1 + (1 + rng.randrange(3) if retried or outcome == "failed" else 0)
        retries = (
            "["
            + ", ".join(
                f'{{"attempt": {n}, "reason": "provider_unavailable", "delay_seconds": {n * 0.8}}}'
                for n in range(1, attempts)
            )
            + "]"
            if attempts > 1
            else "null"
        )
        for attempt in range(1, attempts + 1):
            last = attempt == attempts
            for operation in calls if (last or outcome == "failed") else calls[:1]:
                self._call += 1
                written.provider_calls.append(
                    (
                        self._call, command_id, operation, subject,
                        f"{command_id}:{operation}" if operation != "get_subscription" else None,
                        attempt, "succeeded" if last and outcome == "succeeded" else "transient",
                        None if last and outcome == "succeeded" else "APIConnectionError",
                        stamp(ago - 0.01 * attempt), 15 + rng.randrange(60),
                    )
                )  # fmt: skip
        for event_type, subject_key, data in events:
            self._event += 1
            event_id = f"evt_{_hex(rng, 32)}"
            occurred = stamp(finished)
            kind_of, _, subject_id = subject_key.partition(":")
            document = (
                f'{{"id": "{event_id}", "type": "{event_type}", "version": 1, '
                f'"occurred_at": "{occurred[:19].replace(" ", "T")}Z", "command_id": '
                f'"{command_id}", "subject": {{"type": "{kind_of}", "id": "{subject_id}"}}, '
                f'"data": {data}}}'
            )
            published = stamp(finished - 0.01)
            written.events.append(
                (
                    self._event, event_id, event_type, 1, subject_key, command_id, occurred,
                    document, published,
                )
            )  # fmt: skip
            if ago < MONTH:
                written.webhook_deliveries.append(
                    (
                        f"whd_{_hex(rng, 32)}", event_id, event_type, self._event, subject_key,
                        ENDPOINTS[0], "succeeded", published, 1, 1, published, published, 200,
                        stamp(finished - 0.05), "[]", published, stamp(finished - 0.05),
                    )
                )  # fmt: skip
        client = CLIENTS[org % len(CLIENTS)] if api else None
        written.command = (
            command_id, task, outcome, "api" if api else "queue", payload, attempts, result,
            error, retries, client, _uuid(rng) if api and org % 2 else None,
            _hex(rng, 64) if api else None, _hex(rng, 64), stamp(ago), stamp(finished),
            stamp(ago - 0.001), stamp(finished),
        )  # fmt: skip
        return written


def webhook_endpoints(stamp: Stamp) -> Iterator[Row]:
    for endpoint in ENDPOINTS:
        yield (
            endpoint, f"https://{endpoint}.scale.example/hooks", "[]", "whsec_" + "0" * 32,
            "enabled", endpoint, stamp(YEAR), stamp(YEAR),
        )  # fmt: skip
