"""Organizations and billing accounts: the search, the lists, and an account's page (its
Stripe customer and state, its subscriptions, and one timeline of its commands, Stripe calls
and events), told by the same use case as ``billing-worker accounts show``
(``application/handlers/operations/stories.py``)."""

from __future__ import annotations

import re

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from application.handlers.operations.stories import ShowAccount, account_story
from domain.errors import CommandError
from domain.messages import ID_PATTERN
from domain.operations.console import (
    DEFAULT_PAGE_SIZE,
    AccountStory,
    CommandView,
    merged,
)
from domain.redaction import redact
from worker.api.console.access import Viewer, may_see
from worker.api.console.actions import account_actions
from worker.api.console.layout import (
    PREFIX,
    badge,
    facts,
    link,
    message_page,
    page,
    section,
    table,
    text,
    url,
    when,
)
from worker.api.console.search import search_form, search_response
from worker.api.console.timeline import timeline_rows
from worker.api.state import State

router = APIRouter()

ACCOUNT_STATES = ("pending", "active", "disabled", "deleted")
FAILURES = f"{PREFIX}/failures"


def _id(value: str | None) -> str | None:
    """A search or path id, if it is one (anything else finds nothing, and asks nothing)."""
    if value is None:
        return None
    value = value.strip()
    return value if 0 < len(value) <= 128 and re.fullmatch(ID_PATTERN, value) else None


def _state_filter(state: str | None) -> str:
    options = "".join(
        f'<option value="{s}"{" selected" if s == state else ""}>{s}</option>'
        for s in ("", *ACCOUNT_STATES)
    )
    return (
        f'<form class="search" method="get" action="{PREFIX}/accounts">'
        f'<label>State <select name="status">{options}</select></label>'
        "<button type=submit>Show</button></form>"
    )


def _pager(next_cursor: str | None, path: str, **query: str | None) -> str:
    if not next_cursor:
        return ""
    target = f"{path}?" + "&".join(
        f"{key}={text(value)}" for key, value in {**query, "after": next_cursor}.items() if value
    )
    return f'<p class="pager">{link(target, "Next page")}</p>'


@router.get(f"{PREFIX}/accounts")
def accounts_page(
    caller: Viewer,
    state: State,
    q: str | None = None,
    status: str | None = None,
    after: str | None = None,
) -> Response:
    """The billing accounts by id, in a state; ``q``: the search (``search.py``)."""
    svc = state.svc
    if q:  # the search as it was asked before it had its own page
        return search_response(q, caller, svc)
    account_state = status if status in ACCOUNT_STATES else None
    body = _state_filter(account_state) + search_form()
    try:
        listed = svc.console().billing_accounts(
            state=account_state, org_id=None, limit=DEFAULT_PAGE_SIZE, after=after or None
        )
    except CommandError as refused:  # a cursor no page gave
        return message_page("Bad request", refused.message, status=400)
    rows = [
        [
            link(url("accounts", item.id), item.id),
            link(url("accounts", item.org_id), item.org_id),
            badge(item.state),
            text(item.provider_id or "offline"),
            text(item.currency),
            when(item.created_at),
        ]
        for item in listed.items
    ]
    headers = ("Account", "Organization", "State", "Stripe customer", "Currency", "Created")
    body += table(headers, rows, "no billing accounts")
    body += _pager(listed.next_cursor, f"{PREFIX}/accounts", status=account_state)
    return page("Billing accounts", body, nav="accounts")


def _summary(story: AccountStory) -> str:
    account = redact(story.billing_account)
    organization = story.organization or {}
    stripe = text(story.provider_customer_id or "none (offline)")
    if account.get("customer_deleted_at"):
        stripe += f", deleted at {when(account['customer_deleted_at'])}"
    pairs = [
        ("Organization", f"{text(account['org_id'])} {text(organization.get('name', ''))}"),
        ("State", badge(account["state"])),
        ("Stripe customer", stripe),
        ("Name", text(account.get("name"))),
        ("Email", text(account.get("email"))),
        ("Currency", text(account["currency"])),
        ("Created", when(account["created_at"])),
    ]
    if story.registration_key:
        since = when(story.registration_started_at)
        pairs.append(
            ("Registering", f"key <code>{text(story.registration_key)}</code> since {since}")
        )
    return facts(pairs)


def _failures(commands: list[CommandView]) -> str:
    failed = [command for command in commands if command.status in ("failed", "rejected")]
    if not failed:
        return ""
    items = "".join(
        f"<li><code>{text(c.id)}</code> {text(c.type)} {badge(c.status)}: {text(c.last_error)}</li>"
        for c in failed
    )
    more = link(FAILURES, "Replay or retry it on the failures page")
    return section("What failed", f'<ul class="failures">{items}</ul><p>{more}</p>', id="failed")


def _subscriptions(story: AccountStory) -> str:
    rows = []
    for told in story.subscriptions:
        sub = told.subscription
        pending = next((c for c in told.changes if c["state"] in ("scheduled", "staged")), None)
        rows.append(
            [
                link(url("subscriptions", str(sub["id"])), sub["id"]),
                text(sub["plan_id"]),
                badge(sub["state"]),
                text(sub["provider_id"]),
                when(sub["current_period_end"]),
                "" if pending is None else f"{text(pending['plan_id'])} {badge(pending['state'])}",
            ]
        )
    headers = ("Subscription", "Plan", "State", "Stripe", "Period ends", "Pending change")
    return section("Subscriptions", table(headers, rows, "no subscriptions"), id="subscriptions")


def account_body(story: AccountStory) -> str:
    commands, calls, events = merged(story)
    rows = timeline_rows(commands, calls, events, story.audit)
    timeline = table(("When", "What", "", "Detail"), rows, "nothing happened to it yet")
    return (
        _summary(story)
        + _failures(commands)
        + _subscriptions(story)
        + section("Timeline", timeline, id="timeline")
    )


@router.get(PREFIX + "/accounts/{org_or_account}")
def account_page(org_or_account: str, caller: Viewer, state: State) -> HTMLResponse:
    wanted = _id(org_or_account)
    story = account_story(ShowAccount(wanted), state.svc) if wanted else None
    if story is None or not may_see(caller, str(story.billing_account["org_id"])):
        return message_page(
            "Not found",
            f"No billing account {org_or_account}, nor an organization {org_or_account} with one.",
            status=404,
        )
    title = f"Billing account {story.billing_account['id']}"
    return page(title, account_body(story) + account_actions(caller, story), nav="accounts")
