"""``/console/search``: find an account, organization, subscription or command by what an
operator was told: an id (ours or Stripe's), an organization's handle, an account's whole
name or its whole email address.

Names and addresses are personal data: the console's forms post the query
(``POST /console/search``), so that it stays out of the address bar, the browser's history
and any proxy's access log; ``GET /console/search?q=`` answers the same for a link or a
bookmark of an id. Results show names and addresses masked, as every page does, and the page
repeats a query only when it is an id or a handle. A whole address matches (an operator holds
it already, from a ticket or an email); a part never does, so the search cannot list the
accounts of a domain or guess addresses a letter at a time. One exact id goes straight to its
page.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from domain.messages import is_id
from domain.operations.console import SearchHit
from domain.redaction import mask_email, mask_value
from worker.api.auth import Caller
from worker.api.console.access import Viewer, may_see
from worker.api.console.layout import PREFIX, badge, link, message_page, page, table, text, url
from worker.api.state import State
from worker.bootstrap import Services

router = APIRouter()

SEARCH = f"{PREFIX}/search"
LABEL = "Id, handle, account name or email"
SHOWN = 50
MAX_QUERY_BYTES = 2048
"""A posted search's body at most (a query is one short field)."""
DIRECT = frozenset({"id", "stripe id"})
"""How a lone hit must have matched to go straight to its page."""


def search_form(q: str | None = None) -> str:
    """The search form (home page, accounts, results): posted, so that a name or an address
    never lands in an address; an id or a handle searched is shown in it again."""
    shown = q.strip() if q and is_id(q.strip()) else ""
    return (
        f'<form class="search" method="post" action="{SEARCH}" role="search">'
        f'<label>{LABEL} <input name="q" type="search" value="{text(shown)}" '
        'autocomplete="off"></label><button type=submit>Find</button></form>'
    )


def hit_page(hit: SearchHit) -> str:
    """The page of what ``hit`` found."""
    if hit.kind == "organization":
        return url("organizations", hit.id)
    if hit.kind == "command":
        return url("commands", hit.id)
    if hit.kind == "subscription":
        return url("subscriptions", hit.id)
    return url("accounts", hit.id)


def _direct_page(hit: SearchHit) -> str:
    # An organization's id goes to its billing account, as it always did: that is what an
    # operator who has one looks for (the organization's page is a link away).
    return url("accounts", hit.id) if hit.kind == "organization" else hit_page(hit)


def _described(q: str) -> str:
    """The query as the page may repeat it: an id or a handle whole, personal data masked."""
    if is_id(q):
        return text(q)
    if "@" in q:
        return f"the address {text(mask_email(q))}"
    return f"the name {text(mask_value(q))}"


def _row(hit: SearchHit) -> list[str]:
    organization = link(url("organizations", hit.org_id), hit.org_id) if hit.org_id else ""
    account = (
        link(url("accounts", hit.id), "its billing account") if hit.kind == "organization" else ""
    )
    return [
        text(hit.kind.replace("_", " ")),
        link(hit_page(hit), hit.id),
        text(hit.matched),
        text(hit.label),
        badge(hit.state) if hit.state else "",
        f"{organization} {account}".strip(),
    ]


def search_response(q: str, caller: Caller, svc: Services) -> Response:
    """The results of ``q`` as a page, or a redirect to the page of one exact id."""
    wanted = q.strip()
    hits = [
        hit
        for hit in svc.console().search(wanted, limit=SHOWN)
        if hit.org_id is None or may_see(caller, hit.org_id)
    ]
    if len(hits) == 1 and hits[0].matched in DIRECT:
        return RedirectResponse(_direct_page(hits[0]), status_code=303)
    body = search_form(wanted)
    if not wanted:
        body += '<p class="message">Type an id, a handle, a whole name or a whole address.</p>'
    elif not hits:
        body += (
            f'<p class="message">Nothing is {_described(wanted)}: no account, organization, '
            "subscription or command has it as its id or Stripe id, no organization as its "
            "handle, no account as its whole name or email.</p>"
        )
    else:
        headers = ("Found", "Id", "Matched by", "What", "State", "Organization")
        body += f'<p class="found">{len(hits)} found for {_described(wanted)}.</p>'
        body += table(headers, [_row(hit) for hit in hits], "nothing found")
    return page("Search", body, nav="")


@router.get(SEARCH)
def search_page(caller: Viewer, state: State, q: str = "") -> Response:
    return search_response(q, caller, state.svc)


@router.post(SEARCH)
async def posted_search(request: Request, caller: Viewer, state: State) -> Response:
    media_type = (request.headers.get("content-type") or "").partition(";")[0].strip().lower()
    body = await request.body()
    if media_type != "application/x-www-form-urlencoded" or len(body) > MAX_QUERY_BYTES:
        return message_page(
            "Bad request", "A search is posted by the search form (one short field).", status=400
        )
    try:
        fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=5)
    except ValueError:  # more fields than the form has
        fields = {}
    q = (fields.get("q") or [""])[0]
    return await to_thread.run_sync(search_response, q, caller, state.svc)
