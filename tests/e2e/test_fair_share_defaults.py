"""Each client's share at its defaults, over HTTP (an API process of the shared stack with the
shares' default settings, real Redis, the worker, the Stripe emulator): an organization that
does not exist is refused before anything is recorded or counted, so made-up ids cannot
multiply the share; the client's ceiling in all holds across real organizations; and a real
client's batch of 100 user enables is accepted. The log is read with the command line, as an
operator reads it."""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from adapters.clock import SystemClock
from adapters.db.api_clients import NewClient
from domain.errors import NotFound
from domain.permissions import Grant, Scope
from domain.subscriptions.change_previews import PreviewPlanChange
from tests.support.records import create_organization, create_user
from tests.support.stack import Stack, another_api, eventually
from tests.support.stack import cli_output as cli
from tests.support.subscriptions import new_account, new_plan, operator, subscribe
from worker.settings import Settings

pytestmark = pytest.mark.e2e

SHARES = (
    "client_commands_per_second",
    "client_command_burst",
    "client_total_commands_per_second",
    "client_total_command_burst",
)
DEFAULT_SHARES = {
    f"BILLING_{name.upper()}": str(Settings.model_fields[name].default) for name in SHARES
}
LOGGED_STATUSES = ("queued", "running", "retrying", "waiting", "succeeded", "failed")


@pytest.fixture(scope="module")
def api_at_defaults(stack: Stack) -> Iterator[str]:
    """One more API process of the stack, with every share at its default."""
    with another_api(stack, "api-default-shares", **DEFAULT_SHARES) as url:
        yield url


def http(url: str, client: NewClient, **kwargs: object) -> httpx.Client:
    return httpx.Client(
        base_url=url,
        auth=(client.client_id, client.secret),
        timeout=30,
        **kwargs,  # type: ignore[arg-type]
    )


def previews_logged(stack: Stack) -> int:
    """The previews in the command log, in every status, as ``billing-worker commands``
    lists them."""
    statuses = [option for status in LOGGED_STATUSES for option in ("--status", status)]
    listed, after = 0, None
    while True:
        page = json.loads(
            cli(
                stack,
                "commands",
                "list",
                *statuses,
                "--type",
                PreviewPlanChange.TASK_NAME,
                "--limit",
                "500",
                "--json",
                *(("--after", after) if after else ()),
            )
        )
        listed += len(page["items"])
        after = page["next_cursor"]
        if not after:
            break
    rejected = cli(stack, "commands", "rejected", "--limit", "100000")
    return listed + sum(PreviewPlanChange.TASK_NAME in line for line in rejected.splitlines())


def made_up_preview_path() -> tuple[str, str]:
    org_id = f"org_made_up_{uuid.uuid4().hex[:12]}"
    path = f"/v1beta1/organizations/{org_id}/billing/ba_x/subscriptions/sub_x/change/preview"
    return org_id, path


def new_org(stack: Stack) -> str:
    return create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex}").id


def enable_a_batch(url: str, client: NewClient, user_ids: list[str]) -> Counter[int]:
    """The statuses of enabling ``user_ids`` all at once (8 connections, not waiting for
    the outcomes)."""

    def enable(user_id: str) -> int:
        with http(url, client, headers={"Prefer": "respond-async"}) as api:
            return api.post(f"/v1beta1/users/{user_id}/enable", json={}).status_code

    with ThreadPoolExecutor(8) as pool:
        return Counter(pool.map(enable, user_ids))


def disabled_users(stack: Stack, count: int) -> list[str]:
    return [
        create_user(
            stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@example.com", disabled=True
        ).id
        for _ in range(count)
    ]


def test_sixty_previews_at_made_up_organizations_are_refused_with_the_spec_s_404_and_not_recorded(
    stack: Stack, api_at_defaults: str
) -> None:
    client = stack.new_client("made-up-organizations")
    before = previews_logged(stack)

    made_up = [made_up_preview_path() for _ in range(60)]

    def preview(path: str) -> httpx.Response:
        with http(api_at_defaults, client) as api:
            return api.post(path, json={"plan": "team"})

    # At once: past its first few, a client's refusals are held a second each.
    with ThreadPoolExecutor(30) as pool:
        refused = dict(
            zip(
                (org_id for org_id, _ in made_up),
                pool.map(preview, (path for _, path in made_up)),
                strict=True,
            )
        )

    assert {answer.status_code for answer in refused.values()} == {404}
    for org_id, answer in refused.items():
        assert answer.json() == NotFound.resource("organization", org_id).to_body()
        assert "Command-Id" not in answer.headers  # no command was made
    assert previews_logged(stack) == before


def test_a_batch_of_100_user_enables_is_accepted_at_the_default_shares(
    stack: Stack, api_at_defaults: str
) -> None:
    client = stack.new_client("user-service", grant=Grant(scopes=frozenset({Scope.USERS_ENABLE})))

    statuses = enable_a_batch(api_at_defaults, client, disabled_users(stack, 100))

    assert 429 not in statuses, statuses
    assert sum(statuses.values()) == 100


def test_a_flood_of_made_up_organizations_takes_nothing_from_any_client_s_share(
    stack: Stack, api_at_defaults: str
) -> None:
    ctx = operator(stack)
    target = subscribe(ctx, new_account(ctx), new_plan(ctx, "flood-victim", 900))
    to_plan = new_plan(ctx, "flood-victim-to", 2900)
    flooder = stack.new_client("made-up-flood")
    other = stack.new_client("other-client")
    per_organization = 1 + int(DEFAULT_SHARES["BILLING_CLIENT_COMMAND_BURST"])

    stop = threading.Event()
    lock = threading.Lock()
    flood: Counter[int] = Counter()

    def send_made_up_previews() -> None:
        with http(api_at_defaults, flooder) as api:
            while not stop.is_set():
                _, path = made_up_preview_path()
                status = api.post(path, json={"plan": "team"}).status_code
                with lock:
                    flood[status] += 1

    threads = [threading.Thread(target=send_made_up_previews) for _ in range(8)]
    for thread in threads:
        thread.start()
    try:
        eventually(lambda: sum(flood.values()) >= 30 or None, what="the flood under way")
        # The other client's whole share for its organization, synchronously, mid-flood.
        with http(api_at_defaults, other) as api:
            previews = Counter(
                api.post(f"{target.change_url}/preview", json={"plan": to_plan.name}).status_code
                for _ in range(per_organization)
            )
        eventually(lambda: sum(flood.values()) >= 60 or None, what="60 made-up previews")
        flooding = all(thread.is_alive() for thread in threads)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)

    assert flooding
    assert set(flood) == {404}, flood
    assert previews == {200: per_organization}, previews
    # The refusals were not counted: the flooder's own ceiling is whole.
    batch = enable_a_batch(api_at_defaults, flooder, disabled_users(stack, 100))
    assert 429 not in batch, batch


def test_a_client_s_ceiling_in_all_holds_across_real_organizations(stack: Stack) -> None:
    client = stack.new_client("many-organizations")
    orgs = [new_org(stack) for _ in range(6)]
    account = {"body": {"name": "Acme", "email": "billing@acme.example"}, "offline": True}

    # One token a minute in all, a burst of 4 on top; each organization's share at its default.
    with (
        another_api(
            stack,
            "api-small-ceiling",
            **{
                **DEFAULT_SHARES,
                "BILLING_CLIENT_TOTAL_COMMANDS_PER_SECOND": str(1 / 60),
                "BILLING_CLIENT_TOTAL_COMMAND_BURST": "4",
            },
        ) as url,
        http(url, client, headers={"Prefer": "respond-async"}) as api,
    ):
        answers = [api.post(f"/v1beta1/organizations/{org}/billing", json=account) for org in orgs]

    assert [answer.status_code for answer in answers] == [202] * 5 + [429]
    refusal = answers[-1]
    assert refusal.headers["Retry-After"].isdigit()
    assert refusal.json()["code"] == 8  # RESOURCE_EXHAUSTED
    assert refusal.json()["details"][0]["reason"] == "CLIENT_COMMAND_RATE_EXCEEDED"
    assert "in all" in refusal.json()["message"]
    assert "Command-Id" not in refusal.headers
