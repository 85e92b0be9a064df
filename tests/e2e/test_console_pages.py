"""The operator's console in a real browser (Debian's headless Chromium, driven by
Playwright) on a real stack: an account whose registration Stripe failed is found from the
home page, and its page shows the failure; a subscription's page shows its plan change and
the invoices Stripe made, with their lines. Every page is watched: a test fails if one
answers an HTTP error or logs a console error, shows a client's secret or personal data the
masking rules hide, or shows another organization's data to a client limited to one. On
SQLite and PostgreSQL."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from celery import Celery
from playwright.sync_api import Browser

from adapters.clock import SystemClock
from adapters.messaging.redis_clients import redis_client
from adapters.messaging.sweep_successes import SweepSuccesses
from application.requests.sweeps import RELAY_EVENTS
from domain.permissions import Grant, Scope
from stripe_emulator import EmulatorAdmin
from tests.support.browser import chromium, chromium_path, watched_page
from tests.support.records import create_organization
from tests.support.stack import Stack, eventually
from tests.support.subscriptions import new_account, new_plan, operator, subscribe
from worker.settings import Settings

pytestmark = pytest.mark.e2e

EMAIL = "jane.doe@acme.example"
PHONE = "+14155550123"
ACCOUNT = {"body": {"name": "Jane Doe", "email": EMAIL, "phone": PHONE}}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium(chromium_path()) as launched:
        yield launched


def leaks(content: str, *secrets: str) -> list[str]:
    """What of ``secrets`` or the masked personal data a page shows whole."""
    return [secret for secret in (*secrets, EMAIL, PHONE, "Jane Doe") if secret in content]


def failed_registration(stack: Stack, emulator: EmulatorAdmin) -> tuple[str, str]:
    """An organization whose account's registration Stripe refused until its retries were
    spent: the organization's id and the failed command's."""
    org = create_organization(stack.sessions, SystemClock(), name=f"con-{uuid.uuid4().hex[:8]}")
    emulator.add_fault("service_unavailable", "POST /v1/customers")
    try:
        with stack.http() as api:
            failed = api.post(f"/v1beta1/organizations/{org.id}/billing", json=ACCOUNT)
    finally:
        emulator.clear_faults()
    assert failed.status_code == 503, failed.text
    command_id = failed.headers["Command-Id"]
    assert stack.finished(command_id).status.value == "failed"
    return org.id, command_id


def test_a_failed_registration_is_found_from_the_home_page_and_its_page_shows_the_failure(
    stack: Stack, emulator: EmulatorAdmin, browser: Browser
) -> None:
    org_id, command_id = failed_registration(stack, emulator)
    client = stack.new_client(
        f"console-{uuid.uuid4().hex[:6]}",
        Grant(scopes=frozenset({Scope.OPERATIONS_READ, Scope.OPERATIONS_WRITE})),
    )

    with watched_page(browser, stack.api_url, (client.client_id, client.secret)) as watched:
        page = watched.page
        page.goto("/console")
        home = page.content()
        assert "Accounts stuck pending" in home
        assert "periods billed at the wrong price (renewals)" in home  # the gauge's figure
        assert "Queues" in home
        assert page.get_by_role("link", name="Failures").get_attribute("href") == (
            "/console/failures"
        )
        page.get_by_role("search").get_by_label("Id, handle, account name or email").fill(org_id)
        page.get_by_role("search").get_by_role("button", name="Find").click()
        page.wait_for_url(re.compile(rf"/console/accounts/{org_id}$"))
        account = page.content()
        failure = page.locator("#failed").inner_text()
        timeline = page.locator("#timeline").inner_text()
        assert command_id in failure
        assert "failed" in failure
        assert "create_customer" in timeline
        assert "key " in timeline
        assert "pending" in page.locator(".facts").inner_text()
        assert "j***@acme.example" in account  # masked, as in the logs
        assert page.get_by_role("link", name="Replay or retry it on the failures page")
        assert leaks(account, client.secret) == []
        assert leaks(home, client.secret) == []
        # The home page's failures list it too (the newest of the last day).
        page.goto("/console")
        assert command_id in page.locator("#failed").inner_text()
    assert watched.problems == []


def test_a_subscription_page_shows_its_plan_change_and_the_invoices_stripe_made(
    stack: Stack, browser: Browser
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
    client = stack.new_client(f"console-{suffix}", Grant(scopes=frozenset({Scope.OPERATIONS_READ})))

    with watched_page(browser, stack.api_url, (client.client_id, client.secret)) as watched:
        page = watched.page
        page.goto(f"/console/accounts/{account.org_id}")
        page.get_by_role("link", name=subscribed.id).click()
        page.wait_for_url(re.compile(rf"/console/subscriptions/{subscribed.id}$"))
        changes = page.locator("#changes").inner_text()
        invoices = page.locator("#invoices").inner_text()
        assert team.id in changes
        assert "applied" in changes
        assert subscribed.provider_id in page.locator(".facts").first.inner_text()
        assert "in_" in invoices
        assert "no lines" not in invoices
        assert "10.00" in invoices  # the first invoice: a month of starter, as Stripe billed
        upcoming = page.locator("#next-invoice").inner_text()
        assert "49.00 USD" in upcoming  # the next month, at team's price
        assert leaks(page.content(), client.secret) == []
    assert watched.problems == []


def test_a_client_limited_to_one_organization_sees_no_organizations_data(
    stack: Stack, browser: Browser
) -> None:
    ctx = operator(stack)
    mine, other = new_account(ctx), new_account(ctx)
    limited = stack.new_client(
        f"limited-{uuid.uuid4().hex[:6]}",
        Grant(scopes=frozenset({Scope.OPERATIONS_READ}), org_ids=frozenset({mine.org_id})),
    )
    paths = [
        "/console",
        "/console/accounts",
        "/console/organizations",
        f"/console/accounts/{other.org_id}",
        f"/console/accounts/{other.id}",
        f"/console/accounts?q={other.org_id}",
    ]

    with watched_page(browser, stack.api_url, (limited.client_id, limited.secret)) as watched:
        watched.expected_statuses.add(403)
        for path in paths:
            answer = watched.page.goto(path)
            assert answer is not None, path
            assert answer.status == 403, path
            content = watched.page.content()
            assert other.org_id not in content, path
            assert other.id not in content, path
            assert "spans every organization" in content
    assert watched.problems == []


def test_the_console_asks_for_credentials_and_refuses_a_client_without_operations_read(
    stack: Stack, browser: Browser
) -> None:
    reader_of_commands = stack.new_client(f"cmds-{uuid.uuid4().hex[:6]}", Grant())

    with watched_page(browser, stack.api_url, None) as anonymous:
        # A browser without credentials shows its own sign-in prompt at the challenge (headless,
        # the navigation is abandoned): what the console answered is read without navigating.
        challenged = anonymous.page.request.get("/console")
        assert challenged.status == 401
        assert challenged.headers["www-authenticate"].startswith("Basic")
        assert "authentication is required" in challenged.text()
    with watched_page(
        browser, stack.api_url, (reader_of_commands.client_id, reader_of_commands.secret)
    ) as refused:
        refused.expected_statuses.add(403)
        answer = refused.page.goto("/console")
        assert answer is not None
        assert answer.status == 403
        assert "operations:read" in refused.page.content()
    assert anonymous.problems == []
    assert refused.problems == []


def test_the_home_page_shows_when_a_sweep_last_succeeded_in_a_worker(
    stack: Stack, browser: Browser
) -> None:
    successes = SweepSuccesses(redis_client(Settings(redis_url=stack.redis_url)))
    before = successes.read().get(RELAY_EVENTS)
    publisher = Celery("beat-for-a-moment", broker=stack.redis_url)
    try:  # what beat sends every second: the worker runs it as a sweep
        publisher.send_task(RELAY_EVENTS, queue="maintenance")
    finally:
        publisher.close()
    succeeded = eventually(
        lambda: (at := successes.read().get(RELAY_EVENTS)) and at != before and at,
        30,
        "the relay sweep to succeed",
    )
    client = stack.new_client(
        f"console-{uuid.uuid4().hex[:6]}", Grant(scopes=frozenset({Scope.OPERATIONS_READ}))
    )

    with watched_page(browser, stack.api_url, (client.client_id, client.secret)) as watched:
        watched.page.goto("/console")
        row = watched.page.locator("#sweeps tr", has_text=RELAY_EVENTS).inner_text()
    assert f"{succeeded:%Y-%m-%d %H:%M:%S}" in row
    assert watched.problems == []


def test_a_cursor_no_page_gave_is_a_page_saying_so_not_an_error(
    stack: Stack, browser: Browser
) -> None:
    client = stack.new_client(
        f"console-{uuid.uuid4().hex[:6]}", Grant(scopes=frozenset({Scope.OPERATIONS_READ}))
    )

    with watched_page(browser, stack.api_url, (client.client_id, client.secret)) as watched:
        watched.expected_statuses.add(400)
        for path in ("/console/accounts?after=nope", "/console/organizations?after=nope"):
            answer = watched.page.goto(path)
            assert answer is not None
            assert answer.status == 400, path
            assert "after must be the next_cursor" in watched.page.content(), path
    assert watched.problems == []
