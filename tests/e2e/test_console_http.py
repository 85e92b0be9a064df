"""The console's addresses over HTTP on a real stack, whatever answers them: every response
(a page, the search's redirect, the stylesheet, a refusal, a miss) carries the console's
security headers; ``HEAD`` answers a page's headers without its body; ``OPTIONS`` names the
methods an address takes and grants no other origin anything; a miss or a wrong method under
``/console`` is the console's HTML page, while elsewhere the API still answers JSON. On
SQLite and PostgreSQL."""

from __future__ import annotations

import uuid

import httpx
import pytest

from domain.permissions import Grant, Scope
from tests.support.stack import Stack
from tests.support.subscriptions import new_account, operator
from worker.api.console.layout import SECURITY_HEADERS

pytestmark = pytest.mark.e2e

READ_WRITE = Grant(scopes=frozenset({Scope.OPERATIONS_READ, Scope.OPERATIONS_WRITE}))


def signed_in(stack: Stack) -> httpx.Client:
    client = stack.new_client(f"ops-{uuid.uuid4().hex[:6]}", grant=READ_WRITE)
    return stack.http(client, follow_redirects=False)


def anonymous_browser(stack: Stack) -> httpx.Client:
    """A browser not signed in: no credentials."""
    return httpx.Client(base_url=stack.api_url, timeout=30, follow_redirects=False)


def missing_security_headers(answer: httpx.Response, *, but: tuple[str, ...] = ()) -> list[str]:
    """The console's security headers ``answer`` lacks (``but``: those it sets its own way)."""
    return [
        name
        for name, value in SECURITY_HEADERS.items()
        if name not in but and answer.headers.get(name) != value
    ]


def test_every_console_response_carries_the_security_headers_redirects_and_stylesheet_included(
    stack: Stack,
) -> None:
    account = new_account(operator(stack))
    with signed_in(stack) as web:
        redirect = web.get("/console/accounts", params={"q": account.org_id})
        stylesheet = web.get("/console/static/console.css")
        answers = {
            "a page": web.get("/console"),
            "the search's redirect": redirect,
            "a miss": web.get("/console/no-such-page"),
            "a wrong method": web.put("/console/accounts"),
        }
    with anonymous_browser(stack) as anonymous:
        answers["the sign-in challenge"] = anonymous.get("/console")

    assert redirect.status_code == 303, redirect.text
    assert redirect.headers["location"] == f"/console/accounts/{account.org_id}"
    for what, answer in answers.items():
        assert missing_security_headers(answer) == [], what
    assert stylesheet.status_code == 200
    assert stylesheet.headers["content-type"].startswith("text/css")
    assert missing_security_headers(stylesheet, but=("Cache-Control",)) == []
    assert stylesheet.headers["cache-control"] == "max-age=300"  # its own, kept


def test_head_answers_a_console_pages_headers_without_its_body(stack: Stack) -> None:
    with signed_in(stack) as web:
        got = web.get("/console/failures")
        head = web.head("/console/failures")
        stylesheet = web.head("/console/static/console.css")
        miss = web.head("/console/no-such-page")

    assert head.status_code == 200, head.text
    assert head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]
    assert missing_security_headers(head) == []
    assert stylesheet.status_code == 200
    assert stylesheet.content == b""
    assert int(stylesheet.headers["content-length"]) > 0
    assert miss.status_code == 404


def test_options_names_the_methods_a_console_address_takes_and_grants_no_other_origin(
    stack: Stack,
) -> None:
    preflight = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    with anonymous_browser(stack) as anonymous:
        page = anonymous.options("/console/accounts")
        action = anonymous.options("/console/actions/replay-command/cmd_1", headers=preflight)
        miss = anonymous.options("/console/no-such-page")

    assert page.status_code == 204
    assert page.headers["allow"] == "GET, HEAD, OPTIONS"
    assert action.status_code == 204
    assert action.headers["allow"] == "GET, HEAD, OPTIONS, POST"
    assert not [name for name in action.headers if name.lower().startswith("access-control-")]
    assert missing_security_headers(action) == []
    assert miss.status_code == 404


def test_a_miss_under_console_is_the_consoles_html_page_and_elsewhere_the_apis_json(
    stack: Stack,
) -> None:
    with signed_in(stack) as web:
        misses = [web.get("/console/no-such-page"), web.get("/console/")]
        wrong_method = web.delete("/console/actions/replay-command/cmd_1")
        api_miss = web.get("/v1beta1/no-such-resource")

    for miss in misses:
        assert miss.status_code == 404
        assert miss.headers["content-type"].startswith("text/html")
        assert "There is no console page at this address" in miss.text
        assert 'href="/console"' in miss.text  # the way back, in the frame's navigation
    assert wrong_method.status_code == 405
    assert wrong_method.headers["content-type"].startswith("text/html")
    assert wrong_method.headers["allow"] == "GET, HEAD, OPTIONS, POST"
    assert api_miss.status_code == 404
    assert api_miss.headers["content-type"] == "application/json"
