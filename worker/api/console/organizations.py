"""Organizations: their list (``/console/organizations``, in the top navigation) and an
organization's page (its handle, title and state, and its billing accounts: the live one and
any disabled or deleted before it), each read by id through an index."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from domain.errors import CommandError
from domain.operations.console import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from worker.api.console.access import Viewer, may_see
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
from worker.api.console.search import search_form
from worker.api.state import State

router = APIRouter()


def _pager(next_cursor: str | None) -> str:
    if not next_cursor:
        return ""
    return f'<p class="pager">{link(url("organizations", after=next_cursor), "Next page")}</p>'


@router.get(f"{PREFIX}/organizations")
def organizations_page(caller: Viewer, state: State, after: str | None = None) -> HTMLResponse:
    """Every organization by id, a page at a time, each with its billing account."""
    try:
        listed = state.svc.console().organizations(
            state=None, limit=DEFAULT_PAGE_SIZE, after=after or None
        )
    except CommandError as refused:  # a cursor no page gave
        return message_page("Bad request", refused.message, status=400)
    rows = [
        [
            link(url("organizations", item.id), item.id),
            text(item.name),
            text(item.title),
            badge(item.state),
            when(item.created_at),
            link(url("accounts", item.id), "billing account"),
        ]
        for item in listed.items
    ]
    headers = ("Organization", "Handle", "Title", "State", "Created", "")
    body = search_form() + table(headers, rows, "no organizations") + _pager(listed.next_cursor)
    return page("Organizations", body, nav="organizations")


@router.get(PREFIX + "/organizations/{org_id}")
def organization_page(org_id: str, caller: Viewer, state: State) -> HTMLResponse:
    svc = state.svc
    with svc.unit_of_work() as uow:
        organization = uow.organizations.get(org_id)
    if organization is None or not may_see(caller, organization.id):
        return message_page("Not found", f"No organization {org_id}.", status=404)
    accounts = svc.console().billing_accounts(
        state=None, org_id=organization.id, limit=MAX_PAGE_SIZE, after=None
    )
    summary = facts(
        [
            ("Id", f"<code>{text(organization.id)}</code>"),
            ("Handle", text(organization.name)),
            ("Title", text(organization.title)),
            ("State", badge(organization.state.value)),
            ("Created", when(organization.created_at)),
        ]
    )
    rows = [
        [
            link(url("accounts", account.id), account.id),
            badge(account.state),
            text(account.provider_id or "offline"),
            text(account.currency),
            when(account.created_at),
        ]
        for account in accounts.items
    ]
    headers = ("Account", "State", "Stripe customer", "Currency", "Created")
    body = summary + section(
        "Billing accounts", table(headers, rows, "no billing account yet"), id="accounts"
    )
    return page(f"Organization {organization.name}", body, nav="organizations")
