"""The README's first command, tried as a new user would: `billing-worker up`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
import redis
import stripe  # noqa: TID251 - the test talks to the emulator as any Stripe client would
from celery import Celery

from adapters.db.engine import session_factory
from adapters.db.models import CommandRow
from stripe_emulator import EmulatorAdmin
from tests.support.environment import settings_environment
from tests.support.local_up import http_status, running_up
from tests.support.stack import eventually
from worker.local.embedded import free_port

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with running_up(tmp_path_factory.mktemp("up"), BILLING_FLOWER_PASSWORD="flower-pw") as stack:
        yield stack


_status = http_status


def test_up_enables_the_demo_user_through_the_whole_system(local_stack: dict[str, Any]) -> None:
    response = httpx.post(
        f"{local_stack['api_url']}/v1beta1/users/usr_demo/enable",
        json={},
        auth=(local_stack["client_id"], local_stack["client_secret"]),
        timeout=30,
    )
    assert response.status_code == 200
    assert response.json() == {}
    command_id = response.headers["Command-Id"]
    flower = f"{local_stack['flower_url']}/api/tasks"
    tasks = eventually(
        lambda: (
            (t := httpx.get(flower, auth=("admin", "flower-pw"), timeout=5).json())
            and t.get(command_id, {}).get("state") == "SUCCESS"
            and t
        ),
        30,
        # The worker publishes its task events every 0.1 s: Flower may list the task (the
        # API's task-sent event) a moment before it shows it succeeded.
        "Flower to list the task succeeded",
    )
    assert tasks[command_id]["name"] == "users.enable"
    assert tasks[command_id]["state"] == "SUCCESS"


def test_up_serves_a_stripe_emulator_that_the_stripe_sdk_uses(
    local_stack: dict[str, Any],
) -> None:
    client = stripe.StripeClient(
        "sk_test_emulator", base_addresses={"api": local_stack["stripe_emulator_url"]}
    )
    customer = client.v1.customers.create(
        params={"name": "Ada", "email": "ada@example.com", "metadata": {"org_id": "org_demo"}}
    )
    assert client.v1.customers.retrieve(customer.id).email == "ada@example.com"
    found = client.v1.customers.search(params={"query": "metadata['org_id']:'org_demo'"})
    assert customer.id in [c.id for c in found.data]
    updated = client.v1.customers.update(customer.id, params={"name": "Ada L."})
    assert updated.name == "Ada L."


def test_up_records_what_it_started_in_stack_json(local_stack: dict[str, Any]) -> None:
    for key in ("api_url", "flower_url", "redis_url", "stripe_emulator_url", "database_url"):
        assert local_stack[key]
    assert Path(local_stack["database_url"].removeprefix("sqlite:///")).exists()


def test_up_prints_the_metrics_urls_of_the_api_the_worker_and_beat_and_the_console(
    local_stack: dict[str, Any],
) -> None:
    printed = []
    for line in local_stack["process"].stdout:  # click flushes every line it prints
        printed.append(line)
        if line.startswith("Ctrl-C stops everything"):
            break
    [metrics_line] = [line for line in printed if line.strip().startswith("Metrics")]
    urls = local_stack["metrics_urls"]
    assert set(urls) == {"api", "worker", "beat"}
    for what, url in urls.items():
        assert url in metrics_line, what
        eventually(partial(_answers_ok, url), 30, f"{what} metrics at {url}")
    assert "billing_http_requests_total" in httpx.get(urls["api"], timeout=5).text
    assert "billing_queue_depth" in httpx.get(urls["beat"], timeout=5).text
    [console_line] = [line for line in printed if line.strip().startswith("Console")]
    console = f"{local_stack['api_url']}/console"
    assert console in console_line.split()
    auth = (local_stack["client_id"], local_stack["client_secret"])
    assert httpx.get(console, timeout=10).status_code == 401  # the browser asks who
    assert "billing-worker console" in httpx.get(console, auth=auth, timeout=10).text


def _answers_ok(url: str) -> bool:
    return _status(url) == 200


def _cli(local_stack: dict[str, Any], *args: str) -> Any:
    """Run ``billing-worker ARGS --json`` as a user would next to ``up``; its parsed output."""
    env = settings_environment({"BILLING_DATA_DIR": str(local_stack["data_dir"])})
    done = subprocess.run(
        [sys.executable, "-m", "worker.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if "--json" in args else done.stdout


def test_up_creates_online_and_offline_billing_accounts_as_the_readme_shows(
    local_stack: dict[str, Any],
) -> None:
    api = httpx.Client(
        base_url=local_stack["api_url"],
        auth=(local_stack["client_id"], local_stack["client_secret"]),
        timeout=30,
    )
    sdk = stripe.StripeClient(
        "sk_test_emulator", base_addresses={"api": local_stack["stripe_emulator_url"]}
    )
    body = {
        "body": {
            "name": "Acme Ltd",
            "email": "billing@acme.example",
            "address": {"country": "GB"},
            "tax_data": [{"type": "vat", "id": "GB123456789"}],
        },
        "offline": False,
    }
    online = api.post(
        "/v1beta1/organizations/org_acme/billing", json=body, headers={"Idempotency-Key": "acme-1"}
    )
    again = api.post(
        "/v1beta1/organizations/org_acme/billing", json=body, headers={"Idempotency-Key": "acme-1"}
    )

    assert online.status_code == 200, online.text
    assert again.json() == online.json()
    account = online.json()["billing_account"]
    assert online.json()["organization"]["id"] == "org_acme"
    assert (account["state"], account["provider"]) == ("active", "stripe")
    assert account["tax_data"] == [{"type": "gb_vat", "id": "GB123456789"}]
    found = sdk.v1.customers.search(
        params={"query": f"metadata['billing_account_id']:'{account['id']}'"}
    )
    assert [customer.id for customer in found.data] == [account["provider_id"]]

    org = _cli(local_stack, "orgs", "create", "--name", "offline-co", "--json")
    offline = api.post(
        f"/v1beta1/organizations/{org['id']}/billing",
        json={"body": {"name": "Offline Co", "email": "billing@offline.example"}, "offline": True},
    )
    assert offline.status_code == 200, offline.text
    assert offline.json()["billing_account"]["state"] == "active"
    assert offline.json()["billing_account"]["provider_id"] == ""


def test_up_seeds_a_subscription_whose_plan_changes_at_period_end_or_now(
    local_stack: dict[str, Any],
) -> None:
    url = (
        f"{local_stack['api_url']}/v1beta1/organizations/org_demo/billing/ba_demo"
        "/subscriptions/sub_demo/change"
    )
    auth = (local_stack["client_id"], local_stack["client_secret"])
    prices = {
        p["name"]: p["provider_price_id"] for p in _cli(local_stack, "plans", "list", "--json")
    }
    sdk = stripe.StripeClient(
        "sk_test_emulator", base_addresses={"api": local_stack["stripe_emulator_url"]}
    )

    later = httpx.post(url, json={"plan_change": {"plan": "team"}}, auth=auth, timeout=30)

    assert later.status_code == 200, later.text
    phase = later.json()["phase"]
    assert phase["plan_id"] == "plan_team"
    shown = _cli(local_stack, "subscriptions", "show", "sub_demo", "--json")
    assert (shown["plan_id"], shown["current_period_end"]) == (
        "plan_starter",
        phase["effective_at"],
    )
    assert [(c["state"], c["effective_at"]) for c in shown["changes"]] == [
        ("scheduled", phase["effective_at"])
    ]

    _cli(local_stack, "clock", "advance", "31d", "--reason", "see the renewals")
    applied = eventually(
        lambda: (
            (s := _cli(local_stack, "subscriptions", "show", "sub_demo", "--json"))["plan_id"]
            == "plan_team"
            and s
        ),
        30,
        "beat to apply the change",
    )
    assert applied["changes"][0]["state"] == "applied"
    assert applied["current_period_start"] == phase["effective_at"]

    now = httpx.post(
        url, json={"plan_change": {"plan": "starter", "immediate": True}}, auth=auth, timeout=30
    )

    assert now.status_code == 200, now.text
    at_stripe = sdk.v1.subscriptions.retrieve(applied["provider_id"])
    assert at_stripe["items"].data[0].price.id == prices["starter"]


def test_up_wires_the_emulator_s_webhooks_to_its_own_api(local_stack: dict[str, Any]) -> None:
    [endpoint] = _cli(local_stack, "stripe", "webhooks", "list", "--json")
    assert endpoint["url"] == f"{local_stack['api_url']}/webhooks/stripe"
    sdk = stripe.StripeClient(
        local_stack["stripe_emulator_api_key"],
        base_addresses={"api": local_stack["stripe_emulator_url"]},
    )
    customer = sdk.v1.customers.create(params={"name": "Webhook probe"})
    sdk.v1.customers.update(customer.id, params={"name": "Webhook probe, renamed"})

    [event] = sdk.v1.events.list(params={"type": "customer.updated", "limit": 1}).data
    assert event.data.object.id == customer.id
    with EmulatorAdmin(local_stack["stripe_emulator_url"]) as admin:
        admin.wait_for_deliveries(timeout=15)
        [attempt] = admin.deliveries(event=event.id)
    # Verified by our API and recorded (a customer none of ours: the sync says so).
    assert attempt.status == 200
    with session_factory(local_stack["database_url"])() as session:
        [sync] = [
            row.id
            for row in session.query(CommandRow).filter(CommandRow.type == "stripe.sync_object")
            if row.payload["object_id"] == customer.id
        ]
    assert sync.startswith(f"stripe:customer:{customer.id}:")
    shown = _cli(local_stack, "commands", "show", sync)
    assert "stripe.sync_object" in shown


def test_plans_and_subscriptions_are_created_from_the_command_line(
    local_stack: dict[str, Any],
) -> None:
    plan = _cli(
        local_stack,
        *("plans", "create", "--name", "pro", "--amount", "4900", "--currency", "USD", "--json"),
    )
    subscription = _cli(
        local_stack,
        *("subscriptions", "create", "--org", "org_demo", "--billing-account", "ba_demo"),
        *("--plan", "pro", "--json"),
    )

    assert (plan["name"], plan["currency"], plan["interval"]) == ("pro", "usd", "month")
    assert plan["provider_price_id"].startswith("price_")
    assert (subscription["plan_id"], subscription["state"]) == (plan["id"], "active")
    assert subscription["provider_id"].startswith("sub_")


def test_flower_keeps_its_password_off_command_lines_and_its_metrics_behind_it(
    local_stack: dict[str, Any],
) -> None:
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            assert b"flower-pw" not in cmdline, cmdline
    metrics = f"{local_stack['flower_url']}/metrics"
    assert httpx.get(metrics, timeout=5).status_code == 401
    assert httpx.get(metrics, auth=("admin", "flower-pw"), timeout=5).status_code == 200


def test_up_runs_redis_with_a_password_kept_out_of_sight(local_stack: dict[str, Any]) -> None:
    url = urlparse(local_stack["redis_url"])
    assert url.password
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host=url.hostname, port=url.port).ping()
    assert redis.Redis.from_url(local_stack["redis_url"]).ping()
    data_dir = Path(local_stack["data_dir"])
    assert (data_dir / "stack.json").stat().st_mode & 0o077 == 0
    assert (data_dir / "redis" / "redis-password").stat().st_mode & 0o077 == 0


def _flower_task(local_stack: dict[str, Any], task_id: str) -> dict[str, Any]:
    """The task as Flower's API shows it, once it succeeded."""

    def shown() -> dict[str, Any] | None:
        tasks = httpx.get(
            f"{local_stack['flower_url']}/api/tasks", auth=("admin", "flower-pw"), timeout=5
        ).json()
        task = tasks.get(task_id)
        return task if task and task.get("state") == "SUCCESS" and task.get("kwargs") else None

    return eventually(shown, 30, f"Flower to show {task_id} succeeded")


def _personal(name: str, email: str) -> dict[str, Any]:
    return {
        "name": name,
        "email": email,
        "phone": "+442079460958",
        "address": {"line1": "221B Baker Street", "postal_code": "NW1 6XE", "country": "GB"},
        "tax_data": [{"type": "vat", "id": "GB123456789"}],
    }


def test_flower_the_result_backend_and_the_logs_show_no_personal_data(
    local_stack: dict[str, Any],
) -> None:
    tag = uuid.uuid4().hex[:8]
    over_http = _cli(local_stack, "orgs", "create", "--name", f"http-{tag}", "--json")
    on_queue = _cli(local_stack, "orgs", "create", "--name", f"queue-{tag}", "--json")
    http_email, queue_email = f"ada.{tag}@people.example", f"grace.{tag}@people.example"
    response = httpx.post(
        f"{local_stack['api_url']}/v1beta1/organizations/{over_http['id']}/billing",
        json={"body": _personal("Ada Lovelace Ltd", http_email), "offline": False},
        auth=(local_stack["client_id"], local_stack["client_secret"]),
        timeout=30,
    )
    assert response.status_code == 200, response.text
    # Another service's plain Celery client, publishing straight onto the queue.
    publisher = Celery("another-service", broker=local_stack["redis_url"])
    publisher.conf.update(task_serializer="json", accept_content=["json"])
    queue_task = str(uuid.uuid4())
    try:
        publisher.send_task(
            "billing.create_account",
            queue="billing",
            task_id=queue_task,
            kwargs={
                "command_id": f"queued-{tag}",
                "org_id": on_queue["id"],
                "account": _personal("Grace Hopper Ltd", queue_email),
                "offline": True,
            },
        )
    finally:
        publisher.close()
    backend = redis.Redis.from_url(local_stack["redis_url"])

    for task_id, email in ((response.headers["Command-Id"], http_email), (queue_task, queue_email)):
        task = _flower_task(local_stack, task_id)
        shown = json.dumps(task)
        for personal in (email, "+442079460958", "Baker Street", "GB123456789", "Lovelace"):
            assert personal not in shown, (personal, task)
        masked_email = f"{email[0]}***@people.example"
        assert masked_email in task["kwargs"]
        assert masked_email in task["result"]
        assert "+44*******958" in task["result"]
        stored = backend.get(f"celery-task-meta-{task_id}")
        assert isinstance(stored, bytes)
        assert email.encode() not in stored
        assert masked_email.encode() in stored

    logs = Path(local_stack["logs"])
    for log in logs.glob("*.log"):
        if log.name == "stripe-emulator.log":  # Stripe's side: it keeps what it is sent
            continue
        text = log.read_text(errors="replace")
        for personal in (http_email, queue_email, "+442079460958", "Baker Street"):
            assert personal not in text, (personal, log.name)


def test_up_delivers_signed_events_to_the_readme_receiver(
    local_stack: dict[str, Any], tmp_path: Path
) -> None:
    """The issue's own try: a receiver, `webhooks add`, an account, `clock advance 31d`."""
    port = free_port()
    endpoint = _cli(local_stack, "webhooks", "add", f"http://127.0.0.1:{port}/hook", "--json")
    output = tmp_path / "receiver.out"
    with output.open("wb") as sink:
        receiver = subprocess.Popen(
            [sys.executable, str(EXAMPLES / "webhook_receiver.py"), str(port)],
            env={**os.environ, "WEBHOOK_SECRET": endpoint["secret"]},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    auth = (local_stack["client_id"], local_stack["client_secret"])
    api = partial(httpx.post, auth=auth, timeout=30)

    def printed(line: str) -> bool:
        return line in output.read_text().splitlines()

    try:
        org = _cli(
            local_stack, "orgs", "create", "--name", f"hooked-{uuid.uuid4().hex[:6]}", "--json"
        )
        created = api(
            f"{local_stack['api_url']}/v1beta1/organizations/{org['id']}/billing",
            json={"body": {"name": "Hooked Ltd", "email": "billing@hooked.example"}},
        )
        assert created.status_code == 200, created.text
        account_id = created.json()["billing_account"]["id"]
        eventually(
            lambda: printed(f"billing_account.registered {account_id}"),
            30,
            f"the receiver to print the registration ({output.read_text()[-300:]!r})",
        )
        lines = output.read_text().splitlines()
        # One subject's events arrive in the order they happened.
        assert lines.index(f"billing_account.created {account_id}") < lines.index(
            f"billing_account.registered {account_id}"
        )

        change = api(
            f"{local_stack['api_url']}/v1beta1/organizations/org_demo/billing/ba_demo"
            "/subscriptions/sub_demo/change",
            json={"plan_change": {"plan": "team"}},
        )
        assert change.status_code == 200, change.text
        _cli(local_stack, "clock", "advance", "31d", "--reason", "see the renewals")
        eventually(
            lambda: printed("subscription.plan_change.applied sub_demo"),
            30,
            f"the receiver to print the applied change ({output.read_text()[-300:]!r})",
        )
    finally:
        receiver.kill()
        receiver.wait()


def test_sigterm_stops_every_process_up_started(local_stack: dict[str, Any]) -> None:
    process: subprocess.Popen[str] = local_stack["process"]
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    assert _status(f"{local_stack['api_url']}/healthz") == 0
    assert _status(f"{local_stack['stripe_emulator_url']}/_emulator/health") == 0
    assert json.loads((local_stack["data_dir"] / "stack.json").read_text())["stopped"] is True
