"""The console's failures and actions end to end on a real stack: in headless Chromium
(Debian's, through Playwright), a registration Stripe failed until its retries were spent
is found from the home page on the Failures page, replayed through its confirmation page,
and its account is then active; a form another site makes the signed-in browser post is
refused. Over HTTP as a browser speaks it (Basic credentials, form posts): a POST without
the page's CSRF token, with a forged one, another client's, one of another action or target,
one used already, or from another site is refused with a 403 page and changes nothing, as is
a body that is not form-encoded (415); a read-only client sees no action and its POST is
refused. On SQLite and PostgreSQL."""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import stripe  # noqa: TID251 - the test acts as Stripe's dashboard through the SDK
from playwright.sync_api import Browser, Route

from adapters.clock import SystemClock
from adapters.db.api_clients import NewClient
from domain.messages import CommandStatus
from domain.permissions import Grant, Scope
from domain.subscriptions.change_states import ChangeState
from stripe_emulator import EmulatorAdmin
from tests.support.browser import chromium, chromium_path, watched_page
from tests.support.records import create_organization
from tests.support.redis_server import RedisServer
from tests.support.stack import Stack, another_api, eventually
from tests.support.subscriptions import (
    changes_of,
    new_account,
    new_plan,
    stored_change,
    subscribe,
)
from tests.support.subscriptions import operator as operator_services

pytestmark = pytest.mark.e2e

ACCOUNT = {"body": {"name": "Acme Ltd", "email": "billing@acme.example"}}
TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')
READ_WRITE = Grant(scopes=frozenset({Scope.OPERATIONS_READ, Scope.OPERATIONS_WRITE}))
READ_ONLY = Grant(scopes=frozenset({Scope.OPERATIONS_READ}))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium(chromium_path()) as launched:
        yield launched


def failed_registration(stack: Stack, emulator: EmulatorAdmin) -> tuple[str, str]:
    """An organization whose account's registration failed (Stripe unavailable for the
    whole retry budget), Stripe back since: its id and the failed command's."""
    org = create_organization(stack.sessions, SystemClock(), name=f"cfa-{uuid.uuid4().hex[:8]}")
    emulator.add_fault("service_unavailable", "POST /v1/customers")
    try:
        with stack.http() as api:
            failed = api.post(f"/v1beta1/organizations/{org.id}/billing", json=ACCOUNT)
    finally:
        emulator.clear_faults()  # Stripe is back
    assert failed.status_code == 503, failed.text
    command_id = failed.headers["Command-Id"]
    assert stack.finished(command_id).status is CommandStatus.FAILED
    return org.id, command_id


def account(stack: Stack, org_id: str) -> dict[str, object]:
    with stack.http() as api:
        story = api.get(f"/v1beta1/operations/billing-accounts/{org_id}")
    assert story.status_code == 200, story.text
    shown: dict[str, object] = story.json()["billing_account"]
    return shown


def account_state(stack: Stack, org_id: str) -> str:
    return str(account(stack, org_id)["state"])


def account_of(stack: Stack, org_id: str) -> str:
    return str(account(stack, org_id)["id"])


def signed_in(stack: Stack, client: NewClient) -> httpx.Client:
    """The client's browser: its Basic credentials on every request, as after the prompt."""
    return stack.http(client, follow_redirects=False)


def same_origin(stack: Stack) -> dict[str, str]:
    return {"Origin": stack.api_url.rstrip("/")}


def confirmation_token(page: httpx.Response) -> str:
    assert page.status_code == 200, page.text
    found = TOKEN.search(page.text)
    assert found, page.text
    return html.unescape(found.group(1))


def assert_refused_page(answer: httpx.Response, says: str) -> None:
    assert answer.status_code == 403, answer.text
    assert answer.headers["content-type"].startswith("text/html")
    assert says in answer.text
    assert "Traceback" not in answer.text


def test_a_failed_registration_is_found_on_the_failures_page_replayed_and_the_account_active(
    stack: Stack, emulator: EmulatorAdmin
) -> None:
    org_id, command_id = failed_registration(stack, emulator)
    operator = stack.new_client(f"ops-{uuid.uuid4().hex[:6]}", grant=READ_WRITE)
    action = f"/console/actions/replay-command/{command_id}"

    with signed_in(stack, operator) as web:
        failures = web.get("/console/failures")
        assert failures.status_code == 200, failures.text
        assert command_id in failures.text
        assert "RETRY_BUDGET_EXHAUSTED" in failures.text  # why it failed
        assert f'href="{action}"' in failures.text
        confirmation = web.get(action)
        token = confirmation_token(confirmation)
        assert "billing.create_account" in confirmation.text
        assert f'action="{action}"' in confirmation.text
        assert account_state(stack, org_id) == "pending"

        done = web.post(
            action,
            data={"csrf_token": token, "reason": "Stripe is back"},
            headers=same_origin(stack),
        )

        assert done.status_code == 200, done.text
        assert f"command {command_id} is queued again" in done.text
        account_id = account_of(stack, org_id)
        assert f'href="/console/accounts/{account_id}"' in done.text  # back to what it acted on
        assert stack.finished(command_id).status is CommandStatus.SUCCEEDED
        assert account_state(stack, org_id) == "active"
        after = web.get("/console/failures")
    assert command_id not in after.text


def test_a_post_without_the_pages_token_with_another_clients_or_from_another_site_changes_nothing(
    stack: Stack, emulator: EmulatorAdmin
) -> None:
    org_id, command_id = failed_registration(stack, emulator)
    operator = stack.new_client(f"ops-{uuid.uuid4().hex[:6]}", grant=READ_WRITE)
    other = stack.new_client(f"ops-{uuid.uuid4().hex[:6]}", grant=READ_WRITE)
    action = f"/console/actions/replay-command/{command_id}"
    with signed_in(stack, other) as web:
        others_token = confirmation_token(web.get(action))

    with signed_in(stack, operator) as web:
        token = confirmation_token(web.get(action))
        answers = {
            "no token": web.post(action, data={"reason": "x"}, headers=same_origin(stack)),
            "a forged token": web.post(
                action, data={"csrf_token": f"9999999999.{'0' * 64}"}, headers=same_origin(stack)
            ),
            "another client's token": web.post(
                action, data={"csrf_token": others_token}, headers=same_origin(stack)
            ),
            "another site": web.post(
                action, data={"csrf_token": token}, headers={"Origin": "https://evil.example"}
            ),
            "another site's page": web.post(
                action,
                data={"csrf_token": token},
                headers={"Referer": "https://evil.example/form.html"},
            ),
            "an opaque origin": web.post(
                action, data={"csrf_token": token}, headers={"Origin": "null"}
            ),
            "another site, named with a password": web.post(
                action,
                data={"csrf_token": token},
                headers={"Origin": "https://ops:hunter2@evil.example"},
            ),
        }
        stuffed = web.post(
            action,
            content="&".join(f"f{n}=x" for n in range(50)),
            headers={**same_origin(stack), "Content-Type": "application/x-www-form-urlencoded"},
        )

    for case, answer in answers.items():
        assert answer.status_code == 403, (case, answer.text)
        assert "nothing was changed" in answer.text, case
    assert_refused_page(answers["no token"], "carries no CSRF token")
    assert_refused_page(answers["another client's token"], "not valid for this client")
    assert_refused_page(answers["another site"], "another site")
    named = answers["another site, named with a password"]
    assert_refused_page(named, "(Origin https://***@evil.example)")  # its password masked
    assert "hunter2" not in named.text
    assert stuffed.status_code == 400, stuffed.text
    assert "nothing was changed" in stuffed.text
    assert stack.command(command_id).status is CommandStatus.FAILED
    assert account_state(stack, org_id) == "pending"


def test_a_read_only_client_sees_no_action_and_its_post_is_refused(
    stack: Stack, emulator: EmulatorAdmin
) -> None:
    org_id, command_id = failed_registration(stack, emulator)
    reader = stack.new_client(f"ro-{uuid.uuid4().hex[:6]}", grant=READ_ONLY)
    action = f"/console/actions/replay-command/{command_id}"

    with signed_in(stack, reader) as web:
        failures = web.get("/console/failures")
        account_page = web.get(f"/console/accounts/{org_id}")
        confirmation = web.get(action)
        posted = web.post(action, data={"csrf_token": "x"}, headers=same_origin(stack))

    assert failures.status_code == 200, failures.text
    assert command_id in failures.text  # it reads the failures
    assert org_id in failures.text  # and the account stuck pending
    assert account_page.status_code == 200, account_page.text
    for shown in (failures, account_page):
        assert "/console/actions/" not in shown.text
        assert "<form" not in shown.text
    assert_refused_page(confirmation, "operations:write")
    assert_refused_page(posted, "operations:write")
    assert stack.command(command_id).status is CommandStatus.FAILED
    assert account_state(stack, org_id) == "pending"


def test_a_pending_account_is_marked_offline_from_its_confirmation_page(
    stack: Stack, emulator: EmulatorAdmin
) -> None:
    org_id, _ = failed_registration(stack, emulator)
    operator = stack.new_client(f"ops-{uuid.uuid4().hex[:6]}", grant=READ_WRITE)
    account_id = account_of(stack, org_id)
    action = f"/console/actions/mark-offline/{account_id}"

    with signed_in(stack, operator) as web:
        failures = web.get("/console/failures")
        account_page = web.get(f"/console/accounts/{account_id}")
        assert f'href="{action}"' in failures.text
        assert f'href="{action}"' in account_page.text
        token = confirmation_token(web.get(action))
        without_reason = web.post(
            action, data={"csrf_token": token, "reason": " "}, headers=same_origin(stack)
        )
        done = web.post(  # the same token: a form refused for its reason can be sent again
            action,
            data={"csrf_token": token, "reason": "registered by hand"},
            headers=same_origin(stack),
        )
        timeline = web.get(f"/console/accounts/{account_id}")
        audit = web.get("/console/audit", params={"operator": operator.client_id})

    assert without_reason.status_code == 400, without_reason.text
    assert "mark-offline needs a reason" in without_reason.text
    assert done.status_code == 200, done.text
    assert f"{account_id} marked offline" in done.text
    assert account_state(stack, org_id) == "active"
    said = f"mark-offline by <strong>{operator.client_id}</strong> (console)"
    assert said in timeline.text
    assert "why: registered by hand" in timeline.text
    assert 'href="/console/audit"' in audit.text  # in the navigation
    assert f"<code>billing_account:{account_id}</code>" in audit.text
    assert "registered by hand" in audit.text
    assert f"billing_account.marked_offline billing_account:{account_id}" in audit.text


def test_an_action_on_what_does_not_exist_or_cannot_be_done_is_a_page_saying_why(
    stack: Stack,
) -> None:
    operator = stack.new_client(f"ops-{uuid.uuid4().hex[:6]}", grant=READ_WRITE)

    with signed_in(stack, operator) as web:
        unknown = web.get("/console/actions/replay-command/cmd_nope")
        unknown_kind = web.get("/console/actions/format-disk/cmd_nope")
        letter = web.get("/console/actions/replay-dead-letter/0-0")

    for answer in (unknown, unknown_kind, letter):
        assert answer.status_code == 404, answer.text
        assert answer.headers["content-type"].startswith("text/html")
    assert "command &#x27;cmd_nope&#x27; not found" in unknown.text


def test_the_failures_page_lists_a_dead_letter_with_its_replay(stack: Stack) -> None:
    import redis

    from adapters.messaging.dead_letters import DeadLetters

    letters = DeadLetters(redis.Redis.from_url(stack.redis_url))
    letter_id = letters.add(b"not a message", queue="billing", reason="undecodable: test")
    operator = stack.new_client(f"ops-{uuid.uuid4().hex[:6]}", grant=READ_WRITE)
    action = f"/console/actions/replay-dead-letter/{letter_id}"

    with signed_in(stack, operator) as web:
        failures = web.get("/console/failures")
        token = confirmation_token(web.get(action))
        refused = web.post(
            action, data={"csrf_token": token, "reason": "try it"}, headers=same_origin(stack)
        )

    assert letter_id in failures.text
    assert f'href="{action}"' in failures.text
    assert refused.status_code in (400, 409), refused.text
    assert "still cannot be taken" in refused.text
    assert eventually(lambda: letters.get(letter_id), what="the letter, kept") is not None


def test_in_a_browser_a_failed_registration_is_replayed_from_the_home_page_and_reads_active(
    stack: Stack, emulator: EmulatorAdmin, browser: Browser
) -> None:
    org_id, command_id = failed_registration(stack, emulator)
    account_id = account_of(stack, org_id)
    operator = stack.new_client(f"ops-{uuid.uuid4().hex[:6]}", grant=READ_WRITE)

    with watched_page(browser, stack.api_url, (operator.client_id, operator.secret)) as watched:
        page = watched.page
        page.goto("/console")
        page.get_by_role("navigation").get_by_role("link", name="Failures").click()
        page.wait_for_url(re.compile(r"/console/failures$"))
        failed = page.locator("#failed").get_by_role("row").filter(has_text=command_id)
        assert "RETRY_BUDGET_EXHAUSTED" in failed.inner_text()
        failed.get_by_role("link", name="Replay").click()
        page.wait_for_url(re.compile(rf"/console/actions/replay-command/{command_id}$"))
        assert "billing.create_account" in page.locator(".facts").inner_text()
        page.get_by_label("Why (kept in the audit trail)").fill("Stripe is back")
        page.get_by_role("button", name="Replay the command").click()
        page.wait_for_load_state()
        assert f"command {command_id} is queued again" in page.locator("main").inner_text()
        assert stack.finished(command_id).status is CommandStatus.SUCCEEDED
        page.get_by_role("link", name=f"Back to the account {account_id}").click()
        page.wait_for_url(re.compile(rf"/console/accounts/{account_id}$"))
        assert "active" in page.locator(".facts").first.inner_text()
        replayed = page.locator("#timeline").get_by_role("row").filter(has_text="replay-command")
        assert f"by {operator.client_id} (console)" in replayed.inner_text()
        assert "why: Stripe is back" in replayed.inner_text()
        assert operator.secret not in page.content()
    assert watched.problems == []
    assert account_state(stack, org_id) == "active"


def test_in_a_browser_a_form_another_site_makes_it_post_is_refused_and_changes_nothing(
    stack: Stack, emulator: EmulatorAdmin, browser: Browser
) -> None:
    org_id, command_id = failed_registration(stack, emulator)
    operator = stack.new_client(f"ops-{uuid.uuid4().hex[:6]}", grant=READ_WRITE)
    action = f"{stack.api_url.rstrip('/')}/console/actions/replay-command/{command_id}"
    forged = (
        f'<!doctype html><form method="post" action="{action}">'
        '<input type="hidden" name="csrf_token" value="9999999999.00">'
        '<button type="submit">Win a prize</button></form>'
    )

    def evil_site(route: Route) -> None:
        route.fulfill(status=200, content_type="text/html", body=forged)

    with watched_page(browser, stack.api_url, (operator.client_id, operator.secret)) as watched:
        watched.expected_statuses.add(403)
        page = watched.page
        page.route("http://evil.example/**", evil_site)
        page.goto("http://evil.example/prize.html")
        page.get_by_role("button", name="Win a prize").click()
        page.wait_for_url(re.compile(rf"/console/actions/replay-command/{command_id}$"))
        refusal = page.locator("main").inner_text()
    assert "another site" in refusal
    assert "nothing was changed" in refusal
    assert watched.problems == []
    assert stack.command(command_id).status is CommandStatus.FAILED
    assert account_state(stack, org_id) == "pending"


def test_a_customer_stripe_has_for_a_pending_account_is_adopted_from_the_drift_report(
    stack: Stack, emulator: EmulatorAdmin, sdk: stripe.StripeClient
) -> None:
    org_id, _ = failed_registration(stack, emulator)
    account_id = account_of(stack, org_id)
    customer = sdk.v1.customers.create(
        params={"metadata": {"org_id": org_id, "billing_account_id": account_id}}
    )
    operator = stack.new_client(f"ops-{uuid.uuid4().hex[:6]}", grant=READ_WRITE)
    action = f"/console/actions/adopt-drift/{quote(f'orphan_customer:{account_id}:{customer.id}')}"

    with signed_in(stack, operator) as web:
        failures = web.get("/console/failures")
        assert 'href="/console/failures/drift"' in failures.text
        drift = web.get("/console/failures/drift")
        assert f'href="{action}"' in drift.text, drift.text
        token = confirmation_token(web.get(action))
        done = web.post(
            action, data={"csrf_token": token, "reason": "ours"}, headers=same_origin(stack)
        )
        again = web.get(action)

    assert done.status_code == 200, done.text
    assert "adopted" in done.text
    assert account(stack, org_id)["state"] == "active"
    assert again.status_code == 404  # nothing left to adopt


def test_a_scheduled_plan_change_is_skipped_from_its_confirmation_page(stack: Stack) -> None:
    ctx = operator_services(stack)
    suffix = uuid.uuid4().hex[:8]
    starter, team = new_plan(ctx, f"starter-{suffix}", 1000), new_plan(ctx, f"team-{suffix}", 4900)
    subscribed = subscribe(ctx, new_account(ctx), starter)
    with stack.http() as api:
        changed = api.post(subscribed.change_url, json={"plan_change": {"plan": team.name}})
    assert changed.status_code == 200, changed.text
    [scheduled] = changes_of(stack, subscribed.id)
    operator = stack.new_client(f"ops-{uuid.uuid4().hex[:6]}", grant=READ_WRITE)
    action = f"/console/actions/skip-change/{scheduled.id}"

    with signed_in(stack, operator) as web:
        subscription_page = web.get(f"/console/subscriptions/{subscribed.id}")
        assert f'href="{action}"' in subscription_page.text, subscription_page.text
        confirmation = web.get(action)
        token = confirmation_token(confirmation)
        done = web.post(
            action,
            data={"csrf_token": token, "reason": "the customer changed their mind"},
            headers=same_origin(stack),
        )
        again = web.post(
            action, data={"csrf_token": token, "reason": "again"}, headers=same_origin(stack)
        )
        reopened = web.post(
            action,
            data={"csrf_token": confirmation_token(web.get(action)), "reason": "again"},
            headers=same_origin(stack),
        )

    assert team.id in confirmation.text
    assert done.status_code == 200, done.text
    assert f"change {scheduled.id} skipped" in done.text
    assert f'href="/console/subscriptions/{subscribed.id}"' in done.text
    skipped = stored_change(stack, scheduled.id)
    assert skipped.state is ChangeState.SKIPPED
    assert skipped.reason is not None
    assert skipped.reason.endswith(": the customer changed their mind")
    assert_refused_page(again, "used already")  # the same confirmation, posted twice
    assert reopened.status_code == 200, reopened.text
    assert f"change {scheduled.id} was skipped already" in reopened.text


def test_a_confirmation_posted_twice_is_taken_once_and_refused_the_second_time(
    stack: Stack, emulator: EmulatorAdmin
) -> None:
    org_id, _ = failed_registration(stack, emulator)
    operator = stack.new_client(f"ops-{uuid.uuid4().hex[:6]}", grant=READ_WRITE)
    account_id = account_of(stack, org_id)
    action = f"/console/actions/mark-offline/{account_id}"

    with signed_in(stack, operator) as web:
        token = confirmation_token(web.get(action))
        form = {"csrf_token": token, "reason": "registered by hand"}
        first = web.post(action, data=form, headers=same_origin(stack))
        second = web.post(action, data=form, headers=same_origin(stack))

    assert first.status_code == 200, first.text
    assert f"{account_id} marked offline" in first.text
    assert_refused_page(second, "used already")
    assert "nothing was changed" in second.text


def test_a_token_of_one_action_on_one_target_is_refused_for_another_action_or_target(
    stack: Stack, emulator: EmulatorAdmin
) -> None:
    org_id, command_id = failed_registration(stack, emulator)
    other_org_id, other_command_id = failed_registration(stack, emulator)
    operator = stack.new_client(f"ops-{uuid.uuid4().hex[:6]}", grant=READ_WRITE)
    replay = f"/console/actions/replay-command/{command_id}"
    account_id = account_of(stack, org_id)

    with signed_in(stack, operator) as web:
        token = confirmation_token(web.get(replay))
        form = {"csrf_token": token, "reason": "Stripe is back"}
        another_target = web.post(
            f"/console/actions/replay-command/{other_command_id}",
            data=form,
            headers=same_origin(stack),
        )
        another_action = web.post(
            f"/console/actions/mark-offline/{account_id}", data=form, headers=same_origin(stack)
        )
        assert stack.command(other_command_id).status is CommandStatus.FAILED
        assert account_state(stack, org_id) == "pending"
        # Refused elsewhere, the token is still good for what it was issued for.
        its_own = web.post(replay, data=form, headers=same_origin(stack))

    for refused in (another_target, another_action):
        assert_refused_page(refused, "not valid for this client, this action and this target")
    assert its_own.status_code == 200, its_own.text
    assert stack.finished(command_id).status is CommandStatus.SUCCEEDED
    assert stack.command(other_command_id).status is CommandStatus.FAILED
    assert account_state(stack, other_org_id) == "pending"


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/json", "multipart/form-data; boundary=x", None]
)
def test_a_post_whose_body_is_not_form_encoded_is_refused_and_changes_nothing(
    stack: Stack, emulator: EmulatorAdmin, content_type: str | None
) -> None:
    org_id, command_id = failed_registration(stack, emulator)
    operator = stack.new_client(f"ops-{uuid.uuid4().hex[:6]}", grant=READ_WRITE)
    action = f"/console/actions/replay-command/{command_id}"

    with signed_in(stack, operator) as web:
        token = confirmation_token(web.get(action))
        # What a cross-site form with enctype="text/plain" sends: it parses as the form.
        body = f"csrf_token={token}&reason=x"
        headers = {**same_origin(stack), **({"Content-Type": content_type} if content_type else {})}
        refused = web.post(action, content=body, headers=headers)
        taken = web.post(
            action, data={"csrf_token": token, "reason": "x"}, headers=same_origin(stack)
        )

    assert refused.status_code == 415, refused.text
    assert refused.headers["content-type"].startswith("text/html")
    assert "application/x-www-form-urlencoded" in refused.text
    assert "nothing was changed" in refused.text
    assert taken.status_code == 200, taken.text  # the refused post spent nothing
    assert stack.finished(command_id).status is CommandStatus.SUCCEEDED
    assert account_state(stack, org_id) == "active"


def test_without_redis_an_action_is_refused_with_a_page_saying_nothing_was_changed(
    stack: Stack, emulator: EmulatorAdmin, tmp_path: Path
) -> None:
    org_id, command_id = failed_registration(stack, emulator)
    operator = stack.new_client(f"ops-{uuid.uuid4().hex[:6]}", grant=READ_WRITE)
    action = f"/console/actions/replay-command/{command_id}"
    redis_of_its_own = RedisServer(tmp_path / "redis")
    redis_of_its_own.start()
    settings = {
        "BILLING_REDIS_URL": redis_of_its_own.url,
        "BILLING_CONSOLE_CSRF_SECRET": "a-secret-that-needs-no-redis",
    }
    try:
        with (
            another_api(stack, "api-whose-redis-stops", **settings) as api_url,
            httpx.Client(
                base_url=api_url, auth=(operator.client_id, operator.secret), timeout=30
            ) as web,
        ):
            token = confirmation_token(web.get(action))
            redis_of_its_own.stop()
            refused = web.post(
                action, data={"csrf_token": token, "reason": "x"}, headers={"Origin": api_url}
            )
    finally:
        redis_of_its_own.stop()

    assert refused.status_code == 503, refused.text
    assert refused.headers["content-type"].startswith("text/html")
    assert "cannot check that this confirmation was not used before" in refused.text
    assert "nothing was changed" in refused.text
    assert stack.command(command_id).status is CommandStatus.FAILED
    assert account_state(stack, org_id) == "pending"
