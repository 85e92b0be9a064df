"""Prometheus metrics end to end: real commands through the API, a worker process and beat,
then the API's ``/metrics``, the worker node's exporter and beat's exporter scraped over HTTP
and parsed as Prometheus parses them, on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from celery import Celery
from prometheus_client.parser import text_string_to_metric_families

from adapters.clock import SystemClock
from adapters.messaging.config import CONSUMED_QUEUES
from domain.billing.account_commands import RegisterBillingAccount
from domain.subscriptions.change_states import ChangeState
from tests.support.records import create_organization, create_user
from tests.support.stack import Stack, eventually
from tests.support.subscriptions import new_account, new_plan, operator, subscribe

REGISTER = RegisterBillingAccount.TASK_NAME

pytestmark = pytest.mark.e2e

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> Samples:
    response = httpx.get(url, timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def grew(url: str, name: str, before: Samples, by: float = 1, **labels: str) -> Callable[[], bool]:
    """Whether the sample scraped now is at least ``by`` above ``before``'s."""
    return lambda: value(scrape(url), name, **labels) >= value(before, name, **labels) + by


@pytest.fixture(scope="module")
def beat(stack: Stack) -> Iterator[str]:
    """A celery beat process with its exporter (stopped after the module); its URL."""
    process: subprocess.Popen[bytes] = stack.start_beat(f"beat-metrics-{uuid.uuid4().hex[:6]}")
    url = stack.beat_metrics_url
    eventually(lambda: _answers(url), 30, "beat's exporter")
    yield url
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(15)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def api_metrics(stack: Stack) -> str:
    return f"{stack.api_url}/metrics"


@pytest.fixture
def worker_metrics(stack: Stack) -> str:
    url = stack.worker_metrics_urls["w1"]
    eventually(lambda: _answers(url), 30, "the worker's exporter")
    return url


def disabled_user(stack: Stack) -> str:
    email = f"{uuid.uuid4().hex}@example.com"
    return str(create_user(stack.sessions, SystemClock(), email=email, disabled=True).id)


def new_org(stack: Stack) -> str:
    return create_organization(
        stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex[:10]}"
    ).id


def account(offline: bool) -> dict[str, Any]:
    return {"body": {"name": "Acme Ltd", "email": "billing@acme.example"}, "offline": offline}


def test_an_enabled_user_is_counted_accepted_by_the_api_and_finished_by_the_worker(
    stack: Stack, api_metrics: str, worker_metrics: str
) -> None:
    api_before, worker_before = scrape(api_metrics), scrape(worker_metrics)
    with stack.http() as http:
        response = http.post(f"/v1beta1/users/{disabled_user(stack)}/enable", json={})
    assert response.status_code == 200

    api_after = scrape(api_metrics)
    accepted = ("billing_commands_accepted_total", {"type": "users.enable", "source": "api"})
    assert (
        value(api_after, accepted[0], **accepted[1])
        == value(api_before, accepted[0], **accepted[1]) + 1
    )
    enable_200 = {"route": "/v1beta1/users/{id}/enable", "method": "POST", "status": "200"}
    assert (
        value(api_after, "billing_http_requests_total", **enable_200)
        == value(api_before, "billing_http_requests_total", **enable_200) + 1
    )
    timed = {"route": "/v1beta1/users/{id}/enable", "method": "POST"}
    assert value(api_after, "billing_http_request_seconds_count", **timed) > value(
        api_before, "billing_http_request_seconds_count", **timed
    )

    # The worker answered through the command log before its exporter could be scraped.
    eventually(
        grew(
            worker_metrics,
            "billing_commands_finished_total",
            worker_before,
            type="users.enable",
            outcome="succeeded",
        ),
        what="the worker to count the finished command",
    )
    worker_after = scrape(worker_metrics)
    for histogram in ("billing_command_latency_seconds_count", "billing_command_run_seconds_count"):
        assert (
            value(worker_after, histogram, type="users.enable")
            >= value(worker_before, histogram, type="users.enable") + 1
        ), histogram


def test_an_offline_account_and_a_missing_one_count_succeeded_and_rejected(
    stack: Stack, worker_metrics: str, beat: str
) -> None:
    before = scrape(worker_metrics)
    org_id = new_org(stack)
    with stack.http() as http:
        created = http.post(f"/v1beta1/organizations/{org_id}/billing", json=account(offline=True))
        missing = http.post(
            f"/v1beta1/organizations/{org_id}/billing/ba_missing_{uuid.uuid4().hex[:6]}/register",
            json={},
        )
    assert (created.status_code, missing.status_code) == (200, 404)

    for command_type, outcome in (
        ("billing.create_account", "succeeded"),
        (REGISTER, "rejected"),
    ):
        eventually(
            grew(
                worker_metrics,
                "billing_commands_finished_total",
                before,
                type=command_type,
                outcome=outcome,
            ),
            what=f"a {outcome} {command_type}",
        )
    eventually(
        grew(
            worker_metrics,
            "billing_command_errors_total",
            before,
            type=REGISTER,
            outcome="rejected",
            code="NOT_FOUND",
            reason="NOT_FOUND",
        ),
        what="the rejection counted by its code and reason",
    )
    assert value(scrape(beat), "billing_rejected_commands") >= 1


def test_an_online_account_counts_its_stripe_request_and_budget_call(
    stack: Stack, worker_metrics: str
) -> None:
    before = scrape(worker_metrics)
    with stack.http() as http:
        response = http.post(
            f"/v1beta1/organizations/{new_org(stack)}/billing", json=account(offline=False)
        )
    assert response.status_code == 200, response.text

    eventually(
        grew(
            worker_metrics,
            "billing_stripe_requests_total",
            before,
            operation="create_customer",
            status="200",
        ),
        what="the worker to count its request to Stripe",
    )
    after = scrape(worker_metrics)
    assert value(
        after, "billing_stripe_request_seconds_count", operation="create_customer"
    ) > value(before, "billing_stripe_request_seconds_count", operation="create_customer")
    assert value(after, "billing_stripe_budget_calls_total", kind="write") > value(
        before, "billing_stripe_budget_calls_total", kind="write"
    )


def test_a_stripe_failure_retried_counts_its_status_and_a_provider_retry(
    stack: Stack, worker_metrics: str
) -> None:
    before = scrape(worker_metrics)
    with stack.stripe as emulator:
        emulator.add_fault("api_error", "POST /v1/customers", count=1)
        try:
            with stack.http() as http:
                response = http.post(
                    f"/v1beta1/organizations/{new_org(stack)}/billing", json=account(offline=False)
                )
        finally:
            emulator.clear_faults()
    assert response.status_code == 200, response.text

    eventually(
        grew(
            worker_metrics,
            "billing_command_retries_total",
            before,
            type="billing.create_account",
            reason="provider",
        ),
        what="the worker to count a provider retry",
    )
    after = scrape(worker_metrics)
    assert (
        value(after, "billing_stripe_requests_total", operation="create_customer", status="500")
        >= value(before, "billing_stripe_requests_total", operation="create_customer", status="500")
        + 1
    )
    assert (
        value(after, "billing_command_run_seconds_count", type="billing.create_account")
        >= value(before, "billing_command_run_seconds_count", type="billing.create_account") + 2
    )


def test_an_immediate_plan_change_observes_its_apply_lag(
    stack: Stack, worker_metrics: str, beat: str
) -> None:
    ctx = operator(stack)
    starter, team = new_plan(ctx, "starter", 900), new_plan(ctx, "team", 2900)
    sub = subscribe(ctx, new_account(ctx), starter)
    before = scrape(worker_metrics)
    with stack.http() as http:
        response = http.post(
            sub.change_url, json={"plan_change": {"plan": team.name, "immediate": True}}
        )
    assert response.status_code == 200, response.text

    eventually(
        grew(worker_metrics, "billing_apply_lag_seconds_count", before),
        what="the worker to observe the change's apply lag",
    )
    # A finished change leaves the gauge, which counts the pending ones only (issue 46).
    samples = scrape(beat)
    assert ("billing_scheduled_changes", frozenset({("state", "applied")})) not in samples


def test_a_command_published_on_the_queue_is_counted_accepted_from_the_queue(
    stack: Stack, publisher: Celery, worker_metrics: str
) -> None:
    before = scrape(worker_metrics)
    command_id = f"metrics-{uuid.uuid4().hex}"
    publisher.send_task(
        "users.enable",
        queue="users",
        kwargs={"command_id": command_id, "user_id": disabled_user(stack)},
    )
    stack.finished(command_id)
    eventually(
        grew(
            worker_metrics,
            "billing_commands_accepted_total",
            before,
            type="users.enable",
            source="queue",
        ),
        what="the worker to count a command first seen on the queue",
    )


def test_an_unknown_path_is_counted_unmatched_never_by_its_raw_path(
    stack: Stack, api_metrics: str
) -> None:
    raw = f"/v1beta1/nothing-{uuid.uuid4().hex}"
    with stack.http() as http:
        assert http.get(raw).status_code == 404
    text = httpx.get(api_metrics, timeout=10).text
    assert raw not in text
    with stack.http() as http:
        assert http.request("BREW", raw).status_code in (404, 405)
    assert "BREW" not in httpx.get(api_metrics, timeout=10).text
    unmatched = {"route": "unmatched", "method": "GET", "status": "404"}
    assert value(scrape(api_metrics), "billing_http_requests_total", **unmatched) >= 1


def test_metrics_answer_without_credentials_and_stay_out_of_the_openapi_document(
    stack: Stack, api_metrics: str
) -> None:
    assert httpx.get(api_metrics, timeout=10).status_code == 200
    document = httpx.get(f"{stack.api_url}/openapi.json", timeout=10).json()
    assert "/metrics" not in document["paths"]


def test_beat_serves_every_queue_depth_changes_by_state_and_the_oldest_due_change_age(
    beat: str,
) -> None:
    samples = scrape(beat)
    for queue in CONSUMED_QUEUES:
        assert ("billing_queue_depth", frozenset({("queue", queue)})) in samples, queue
    for state in ChangeState:
        counted = ("billing_scheduled_changes", frozenset({("state", state.value)})) in samples
        assert counted == state.is_pending, state
    assert ("billing_oldest_due_change_age_seconds", frozenset()) in samples
    assert ("billing_failed_commands", frozenset()) in samples
    assert ("billing_rejected_commands", frozenset()) in samples
    assert ("billing_pending_accounts", frozenset()) in samples
    assert ("billing_oldest_pending_account_age_seconds", frozenset()) in samples
    assert ("billing_subscriptions_off_plan", frozenset({("kind", "unknown_price")})) in samples
    assert ("billing_renewals_billed_wrong", frozenset()) in samples
    assert ("billing_subscriptions_discounted", frozenset()) in samples
    assert ("billing_stripe_budget_rate", frozenset({("kind", "write")})) in samples
    for part in ("queues", "database", "stripe_budget"):
        assert value(samples, "billing_collector_up", part=part) == 1, part
