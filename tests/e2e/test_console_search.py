"""The console as a daily tool, in a real browser (Debian's headless Chromium, driven by
Playwright) on a real stack: an account is found from the home page by its organization's
handle, its whole name and its whole email (shown masked, and never put in an address), and a
command by its id; the results lead to the organization's page, the account's and the
command's (its record, attempts, Stripe calls and events); Organizations is in the top
navigation; repeated syncs of an account read from Stripe are one line of its timeline. Every
page is watched for HTTP and console errors. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator

import httpx
import pytest
import stripe  # noqa: TID251 - the test reads the emulator's customer as Stripe would send it
from playwright.sync_api import Browser, Page

from adapters.clock import SystemClock
from domain.permissions import Grant, Scope
from tests.support.browser import chromium, chromium_path, watched_page
from tests.support.records import create_organization
from tests.support.stack import Stack
from tests.support.stripe_events import event as stripe_event
from tests.support.stripe_events import signature

pytestmark = pytest.mark.e2e

READ = Grant(scopes=frozenset({Scope.OPERATIONS_READ}))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium(chromium_path()) as launched:
        yield launched


def open_account(stack: Stack, handle: str, name: str, email: str) -> tuple[str, str, str]:
    """An organization ``handle`` with a billing account registered at Stripe through the
    API: the organization's id, the account's and the creating command's."""
    org = create_organization(stack.sessions, SystemClock(), name=handle)
    with stack.http() as api:
        created = api.post(
            f"/v1beta1/organizations/{org.id}/billing",
            json={"body": {"name": name, "email": email}},
        )
        assert created.status_code < 300, created.text
        story = api.get(f"/v1beta1/operations/billing-accounts/{org.id}")
    assert story.status_code == 200, story.text
    return org.id, str(story.json()["billing_account"]["id"]), created.headers["Command-Id"]


def search(page: Page, query: str) -> None:
    page.goto("/console")
    form = page.get_by_role("search")
    form.get_by_label("Id, handle, account name or email").fill(query)
    form.get_by_role("button", name="Find").click()
    page.wait_for_load_state()


def test_an_account_is_found_by_handle_name_and_email_shown_masked_and_kept_out_of_addresses(
    stack: Stack, browser: Browser
) -> None:
    suffix = uuid.uuid4().hex[:8]
    handle, name, email = f"acme-{suffix}", f"Jane Doe {suffix}", f"jane.{suffix}@acme.example"
    org_id, account_id, command_id = open_account(stack, handle, name, email)
    client = stack.new_client(f"search-{suffix}", READ)

    with watched_page(browser, stack.api_url, (client.client_id, client.secret)) as watched:
        page = watched.page
        search(page, handle)
        results = page.locator("main table").inner_text()
        assert org_id in results
        assert "handle" in results
        page.get_by_role("link", name=org_id).first.click()
        page.wait_for_url(re.compile(rf"/console/organizations/{org_id}$"))
        assert handle in page.locator(".facts").inner_text()
        page.locator("#accounts").get_by_role("link", name=account_id).click()
        page.wait_for_url(re.compile(rf"/console/accounts/{account_id}$"))

        for query, matched in ((name, "name"), (email, "email")):
            search(page, query)
            assert page.url.endswith("/console/search")  # posted: nothing of it in the address
            content = page.content()
            assert f'href="/console/accounts/{account_id}"' in content, query
            assert matched in page.locator("main table").inner_text()
            assert "j***@acme.example" in content  # the address masked, as everywhere
            assert name not in content, query
            assert email not in content, query
            assert suffix not in page.url

        search(page, command_id)  # an exact id goes straight to its page
        page.wait_for_url(re.compile(rf"/console/commands/{re.escape(command_id)}$"))
    assert watched.problems == []


def test_a_commands_page_shows_its_record_attempts_stripe_calls_and_events(
    stack: Stack, browser: Browser
) -> None:
    suffix = uuid.uuid4().hex[:8]
    email = f"cmd.{suffix}@acme.example"
    _, account_id, command_id = open_account(stack, f"cmd-{suffix}", "Command Page", email)
    client = stack.new_client(f"command-{suffix}", READ)

    with watched_page(browser, stack.api_url, (client.client_id, client.secret)) as watched:
        page = watched.page
        page.goto(f"/console/accounts/{account_id}")
        page.locator("#timeline").get_by_role("link", name=command_id).first.click()
        page.wait_for_url(re.compile(rf"/console/commands/{re.escape(command_id)}$"))
        summary = page.locator(".facts").inner_text()
        assert "billing.create_account" in summary
        assert "succeeded" in summary
        assert account_id in summary
        assert "c***@acme.example" in page.locator("#payload").inner_text()
        assert "1 attempt(s)" in page.locator("#attempts").inner_text()
        calls = page.locator("#stripe-calls").inner_text()
        assert "create_customer" in calls
        assert "succeeded" in calls
        events = page.locator("#events").inner_text()
        assert "billing_account.created" in events
        assert "billing_account.registered" in events
        assert email not in page.content()
        watched.expected_statuses.add(404)
        missing = page.goto("/console/commands/cmd_nowhere")
        assert missing is not None
        assert missing.status == 404
        assert "No command cmd_nowhere" in page.content()
    assert watched.problems == []


def test_organizations_are_in_the_navigation_and_list_each_with_its_page(
    stack: Stack, browser: Browser
) -> None:
    suffix = uuid.uuid4().hex[:8]
    org = create_organization(stack.sessions, SystemClock(), name=f"nav-{suffix}")
    client = stack.new_client(f"nav-{suffix}", READ)

    with watched_page(browser, stack.api_url, (client.client_id, client.secret)) as watched:
        page = watched.page
        page.goto("/console")
        page.get_by_role("navigation").get_by_role("link", name="Organizations").click()
        page.wait_for_url(re.compile(r"/console/organizations$"))
        while org.id not in page.locator("main").inner_text():  # its page of the list
            page.get_by_role("link", name="Next page").click()
            page.wait_for_load_state()
        page.get_by_role("link", name=org.id).click()
        page.wait_for_url(re.compile(rf"/console/organizations/{org.id}$"))
        assert "no billing account yet" in page.locator("#accounts").inner_text()
        current = page.get_by_role("navigation").get_by_role("link", name="Organizations")
        assert current.get_attribute("aria-current") == "page"
    assert watched.problems == []


def customer_updated(
    stack: Stack, http: httpx.Client, sdk: stripe.StripeClient, customer_id: str
) -> str:
    """Deliver a signed ``customer.updated`` as Stripe would; the sync command's id."""
    customer = sdk.v1.customers.retrieve(customer_id)
    document = json.loads(json.dumps(customer.to_dict(), default=str))
    with stack.stripe as emulator:
        body = stripe_event(
            "customer.updated", document, f"evt_console_{uuid.uuid4().hex}", created=emulator.now()
        )
    answer = http.post(
        "/webhooks/stripe",
        content=body,
        headers={"Content-Type": "application/json", "Stripe-Signature": signature(body)},
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["command_id"])


def test_repeated_syncs_of_an_account_are_one_line_of_its_timeline(
    stack: Stack, browser: Browser, sdk: stripe.StripeClient
) -> None:
    suffix = uuid.uuid4().hex[:8]
    _, account_id, _ = open_account(stack, f"sync-{suffix}", "Sync", f"s.{suffix}@acme.example")
    with stack.http() as api:
        customer_id = api.get(f"/v1beta1/operations/billing-accounts/{account_id}").json()[
            "provider_customer_id"
        ]
    syncs = []
    with httpx.Client(base_url=stack.api_url, timeout=10) as http:
        for _ in range(3):
            sync = customer_updated(stack, http, sdk, customer_id)
            assert stack.finished(sync).status.value == "succeeded"
            syncs.append(sync)
    assert len(set(syncs)) == 3  # three reads, one after the other
    client = stack.new_client(f"sync-{suffix}", READ)

    with watched_page(browser, stack.api_url, (client.client_id, client.secret)) as watched:
        page = watched.page
        page.goto(f"/console/accounts/{account_id}")
        timeline = page.locator("#timeline").inner_text()
    assert "synced 3 times, first" in timeline
    assert not any(sync in timeline for sync in syncs)  # folded, not told one by one
    assert "create_customer" in timeline  # what is not a sync is still told
    assert watched.problems == []
