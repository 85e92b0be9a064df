"""Rejected is not failed, end to end: HTTP and a queue publisher → a worker process → the
command log, its events, beat's gauges, the operator's command lines, the result backend and
Celery's task events (what Flower shows), on SQLite and PostgreSQL.

A client makes 20 mistakes (unknown user, unknown organization, a second account, a tax id
Stripe refuses, a message that does not validate) among 5 good requests, and a scripted Stripe
outage exhausts one command's retries: exactly one command is failed, for an operator, and
the 20 are rejected, answered over HTTP as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from celery import Celery
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from adapters.clock import SystemClock
from adapters.db.models import EventRow
from tests.support.records import create_organization, create_user
from tests.support.stack import Stack, eventually, stack_of_its_own

pytestmark = pytest.mark.e2e

REJECTED_REDIS_DB = 7
"""Redis databases 7 (SQLite) and 8 (PostgreSQL); see ``tests/e2e/test_webhooks.py``."""
CUSTOMERS = "/v1/customers"


@pytest.fixture(scope="module")
def stack(
    backend: str, workdir: Path, redis_server: str, make_database: Callable[[str], str]
) -> Iterator[Stack]:
    """A stack of its own (worker, beat with its exporter, API): its counts are exact."""
    name = f"rejected_{backend}"
    redis_url = f"{redis_server}/{REJECTED_REDIS_DB + (backend == 'postgresql')}"
    with stack_of_its_own(name, workdir, make_database(name), redis_url) as system:
        system.start_worker()
        system.start_beat()
        system.start_api()
        system.client = system.new_client()
        yield system


@dataclass
class TaskEvents:
    """Celery's task events as Flower receives them, collected while the test runs."""

    failed: dict[str, dict[str, Any]] = field(default_factory=dict)


@pytest.fixture(scope="module")
def task_events(stack: Stack) -> Iterator[TaskEvents]:
    """Listening as Flower listens, from before the first command runs."""
    seen = TaskEvents()
    app = Celery("flower-like", broker=stack.redis_url)
    listening = threading.Event()
    with app.connection_for_read() as connection:
        receiver = app.events.Receiver(
            connection,
            handlers={
                "task-failed": lambda event: seen.failed.update({event["uuid"]: event}),
                # The workers' answer to the receiver's wake-up: it is subscribed.
                "worker-heartbeat": lambda _event: listening.set(),
            },
        )
        thread = threading.Thread(
            target=lambda: receiver.capture(limit=None, timeout=None, wakeup=True), daemon=True
        )
        thread.start()
        assert listening.wait(30), "no worker event received"
        yield seen
        receiver.should_stop = True
        thread.join(5)
    app.close()


@dataclass(frozen=True)
class Story:
    """What the client sent and the answers it got."""

    mistakes: dict[str, httpx.Response]
    """Each mistake's answer, by the mistake's name."""
    published_mistakes: list[str]
    """The command ids of the invalid messages a queue publisher sent."""
    good: list[httpx.Response]
    outage: httpx.Response


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = httpx.get(url, timeout=10).text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def new_org(stack: Stack) -> str:
    return create_organization(stack.sessions, SystemClock(), name=f"o-{uuid.uuid4().hex[:10]}").id


def new_user(stack: Stack) -> str:
    email = f"{uuid.uuid4().hex}@example.com"
    return create_user(stack.sessions, SystemClock(), email=email, disabled=True).id


def offline_account() -> dict[str, Any]:
    return {"body": {"name": "Acme Ltd", "email": "billing@acme.example"}, "offline": True}


def refused_tax_id() -> dict[str, Any]:
    return {
        "body": {
            "name": "Acme GmbH",
            "email": "billing@acme.example",
            "address": {"country": "DE"},
            "tax_data": [{"type": "eu_vat", "id": "DE12"}],
        }
    }


@pytest.fixture(scope="module")
def story(stack: Stack, task_events: TaskEvents) -> Story:
    """20 mistakes, 5 good requests, then one registration while Stripe is down."""
    mistakes: dict[str, httpx.Response] = {}
    good: list[httpx.Response] = []
    with stack.http() as http:
        good += [http.post(f"/v1beta1/users/{new_user(stack)}/enable", json={}) for _ in range(3)]
        orgs = [new_org(stack) for _ in range(2)]
        good += [
            http.post(f"/v1beta1/organizations/{org}/billing", json=offline_account())
            for org in orgs
        ]
        for number in range(8):
            mistakes[f"unknown-user-{number}"] = http.post(
                f"/v1beta1/users/usr_nobody_{uuid.uuid4().hex[:8]}/enable", json={}
            )
        # (An organization that does not exist is refused before anything is recorded.)
        for number in range(5):
            mistakes[f"unknown-account-{number}"] = http.post(
                f"/v1beta1/organizations/{orgs[0]}/billing/ba_nobody_{uuid.uuid4().hex[:8]}"
                "/register",
                json={},
            )
        for number in range(3):
            mistakes[f"second-account-{number}"] = http.post(
                f"/v1beta1/organizations/{orgs[0]}/billing", json=offline_account()
            )
        for number in range(2):
            mistakes[f"stripe-refuses-the-tax-id-{number}"] = http.post(
                f"/v1beta1/organizations/{new_org(stack)}/billing", json=refused_tax_id()
            )
    publisher = Celery("another-service", broker=stack.redis_url)
    publisher.conf.update(task_serializer="json", accept_content=["json"])
    published = [f"bad-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for command_id in published:
        publisher.send_task(
            "users.enable",
            kwargs={"command_id": command_id, "user_id": "not a valid id"},
            queue="users",
        )
    publisher.close()
    for command_id in published:
        stack.finished(command_id)
    with stack.stripe as stripe, stack.http() as http:
        stripe.add_fault("service_unavailable", f"POST {CUSTOMERS}")
        try:
            outage = http.post(
                f"/v1beta1/organizations/{new_org(stack)}/billing",
                json={"body": {"name": "Acme Ltd", "email": "billing@acme.example"}},
            )
        finally:
            stripe.clear_faults()
    return Story(mistakes, published, good, outage)


def command_ids(story: Story) -> list[str]:
    return [answer.headers["Command-Id"] for answer in story.mistakes.values()] + list(
        story.published_mistakes
    )


def cli(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "worker.cli", *args],
        env={**os.environ, **stack.env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_each_mistake_is_answered_over_http_as_before(story: Story) -> None:
    statuses = {name: answer.status_code for name, answer in story.mistakes.items()}
    codes = {name: answer.json()["code"] for name, answer in story.mistakes.items()}

    assert [answer.status_code for answer in story.good] == [200] * 5
    assert {name: s for name, s in statuses.items() if name.startswith("unknown")} == {
        name: 404 for name in statuses if name.startswith("unknown")
    }
    assert {statuses[f"second-account-{n}"] for n in range(3)} == {409}
    assert {statuses[f"stripe-refuses-the-tax-id-{n}"] for n in range(2)} == {400}
    assert {codes[f"stripe-refuses-the-tax-id-{n}"] for n in range(2)} == {3}
    assert (story.outage.status_code, story.outage.json()["code"]) == (503, 14)


def test_the_mistakes_end_rejected_and_the_outage_alone_failed(stack: Stack, story: Story) -> None:
    rejected = [stack.finished(command_id) for command_id in command_ids(story)]
    failed = stack.finished(story.outage.headers["Command-Id"])

    assert len(rejected) == 20
    assert {record.status.value for record in rejected} == {"rejected"}
    assert all(record.error is not None for record in rejected)
    assert (failed.status.value, failed.attempts) == ("failed", 4)
    with stack.http() as http:
        shown = http.get(f"/v1beta1/commands/{rejected[0].id}").json()
    assert (shown["status"], shown["error"]["code"]) == ("rejected", 5)


def test_beat_counts_one_failed_command_for_the_alert_and_the_20_rejected_apart(
    stack: Stack, story: Story
) -> None:
    def read() -> tuple[float, float] | None:
        samples = scrape(stack.beat_metrics_url)
        counted = (
            value(samples, "billing_failed_commands"),
            value(samples, "billing_rejected_commands"),
        )
        return counted if counted == (1, 20) else None

    assert eventually(read, 30, "beat's gauges") == (1, 20)
    worker = scrape(stack.worker_metrics_urls["w1"])
    assert (
        value(
            worker,
            "billing_command_errors_total",
            type="billing.create_account",
            outcome="failed",
            code="UNAVAILABLE",
            reason="RETRY_BUDGET_EXHAUSTED",
        )
        == 1
    )
    assert (
        value(
            worker,
            "billing_command_errors_total",
            type="billing.create_account",
            outcome="rejected",
            code="INVALID_ARGUMENT",
            reason="PROVIDER_REJECTED",
        )
        == 2
    )


def test_the_operator_lists_one_failed_command_and_the_20_rejected(
    stack: Stack, story: Story
) -> None:
    failed = cli(stack, "commands", "failed")
    rejected = cli(stack, "commands", "rejected")

    assert failed.returncode == 0, failed.stderr
    [failed_row] = failed.stdout.splitlines()[1:]
    assert failed_row.split()[0] == story.outage.headers["Command-Id"]
    assert "RETRY_BUDGET_EXHAUSTED" in failed_row
    assert rejected.returncode == 0, rejected.stderr
    listed = [row.split()[0] for row in rejected.stdout.splitlines()[1:]]
    assert sorted(listed) == sorted(command_ids(story))


def test_replaying_a_rejected_command_is_refused_in_one_line_naming_why(
    stack: Stack, story: Story
) -> None:
    command_id = story.mistakes["unknown-user-0"].headers["Command-Id"]

    replay = cli(stack, "commands", "replay", command_id, "--reason", "try again")

    assert replay.returncode == 1
    assert "Traceback" not in replay.stderr
    [line] = replay.stderr.splitlines()
    assert f"command {command_id} was rejected (NOT_FOUND (5): user 'usr_nobody_" in line
    assert stack.command(command_id).status.value == "rejected"


def test_services_on_the_queue_see_command_rejected_and_command_failed_events(
    stack: Stack, story: Story
) -> None:
    stack.finished(story.outage.headers["Command-Id"])
    with stack.sessions() as session:
        events = session.execute(select(EventRow.type, EventRow.subject_key)).all()
    by_command = {
        subject.removeprefix("command:"): kind
        for kind, subject in events
        if kind in ("command.rejected", "command.failed")
    }

    assert {by_command[command_id] for command_id in command_ids(story)} == {"command.rejected"}
    assert by_command[story.outage.headers["Command-Id"]] == "command.failed"
    assert len(by_command) == 21


def test_a_queue_publisher_reads_a_rejection_from_the_result_backend_by_its_type(
    stack: Stack, story: Story
) -> None:
    publisher = Celery("another-service", broker=stack.redis_url, backend=stack.redis_url)
    publisher.conf.update(
        task_serializer="json", accept_content=["json"], result_accept_content=["json"]
    )
    try:
        sent = publisher.send_task(
            "users.enable",
            kwargs={"user_id": f"usr_nobody_{uuid.uuid4().hex[:8]}"},
            queue="users",
        )
        with pytest.raises(Exception, match=r"\"code\": 5") as raised:
            sent.get(timeout=30)
        assert sent.failed()
    finally:
        publisher.close()

    # Without our code, Celery names the exception by its type, and its message is the body.
    assert type(raised.value).__name__ == "CommandRejected"
    body = json.loads(str(raised.value))
    assert (body["code"], stack.command(sent.id).status.value) == (5, "rejected")


def test_flower_sees_each_rejection_and_failure_as_one_readable_line_without_a_traceback(
    stack: Stack, story: Story, task_events: TaskEvents
) -> None:
    rejected_id = story.mistakes["stripe-refuses-the-tax-id-0"].headers["Command-Id"]
    failed_id = story.outage.headers["Command-Id"]

    def received() -> tuple[dict[str, Any], dict[str, Any]] | None:
        if rejected_id in task_events.failed and failed_id in task_events.failed:
            return task_events.failed[rejected_id], task_events.failed[failed_id]
        return None

    rejected, failed = eventually(received, 30, "the task-failed events")

    assert rejected["exception"].startswith(
        "CommandRejected(INVALID_ARGUMENT (3) PROVIDER_REJECTED: the billing provider "
        "rejected the request: "
    )
    assert "; account.tax_data[0].id: " in rejected["exception"]
    assert failed["exception"].startswith(
        "CommandFailed(UNAVAILABLE (14) RETRY_BUDGET_EXHAUSTED: gave up after 4 attempts: "
    )
    for event in (rejected, failed):
        assert "\n" not in event["exception"]
        assert "\\" not in event["exception"]  # no JSON escaped inside a repr
        assert event["traceback"] is None
