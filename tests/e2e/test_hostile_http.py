"""Bodies a broken or hostile client sends: each gets a 4xx with the spec's error body, never
a 500, a traceback or a guess at what it meant."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlparse

import httpx
import pytest

from adapters.clock import SystemClock
from tests.support.records import create_organization
from tests.support.stack import Stack, basic

pytestmark = pytest.mark.e2e

ACCOUNT = '{"name": "Acme", "email": "billing@acme.example"}'


@pytest.fixture
def create_url(stack: Stack) -> str:
    org = create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex}")
    return f"/v1beta1/organizations/{org.id}/billing"


def spec_error(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    return dict(body)


def violated_fields(body: dict[str, object]) -> list[str]:
    details = body["details"]
    assert isinstance(details, list)
    return [v["field"] for d in details for v in d.get("fieldViolations", [])]


def post_raw(api: httpx.Client, url: str, content: bytes, **headers: str) -> httpx.Response:
    return api.post(url, content=content, headers={"Content-Type": "application/json", **headers})


@pytest.mark.parametrize(
    ("content", "field"),
    [
        pytest.param(b"[" * 990 + b"]" * 990, "body", id="nested-990-deep"),
        pytest.param(
            ('{"body": ' * 40 + "{}" + "}" * 40).encode(), "body.body.body", id="objects-40-deep"
        ),
        pytest.param(b'{"body": {"name": NaN}}', "body", id="nan"),
        pytest.param(b'{"body": {"name": Infinity}}', "body", id="infinity"),
        pytest.param(
            f'{{"body": {ACCOUNT}, "offline": true, "offline": false}}'.encode(),
            "offline",
            id="duplicate-key",
        ),
        pytest.param(f'{{"body": {ACCOUNT}}}'.encode("utf-16"), "body", id="utf-16"),
        pytest.param(b"\xef\xbb\xbf" + f'{{"body": {ACCOUNT}}}'.encode(), "body", id="bom"),
        pytest.param(
            b'{"body": {"name": "Ac\\u0000me", "email": "b@acme.example"}}', "body.name", id="nul"
        ),
        pytest.param(
            b'{"body": {"name": "Acme\\r\\nFORGED", "email": "b@acme.example"}}',
            "body.name",
            id="cr-lf",
        ),
    ],
)
def test_a_body_outside_strict_json_is_a_400_naming_the_field(
    api: httpx.Client, create_url: str, content: bytes, field: str
) -> None:
    body = spec_error(post_raw(api, create_url, content), 400)

    assert body["code"] == 3
    assert violated_fields(body)[0].startswith(field)


@pytest.mark.parametrize(
    "content_type",
    ["APPLICATION/JSON", "application/json; charset=UTF-8", "Application/Problem+JSON"],
)
def test_media_types_are_matched_without_regard_to_case(
    api: httpx.Client, create_url: str, content_type: str
) -> None:
    response = post_raw(
        api,
        create_url,
        f'{{"body": {ACCOUNT}, "offline": true}}'.encode(),
        **{"Content-Type": content_type},
    )

    assert response.status_code == 200, response.text


def test_a_charset_other_than_utf8_is_a_415(api: httpx.Client, create_url: str) -> None:
    response = post_raw(
        api,
        create_url,
        f'{{"body": {ACCOUNT}}}'.encode("latin-1"),
        **{"Content-Type": "application/json; charset=latin-1"},
    )

    assert spec_error(response, 415)["code"] == 3


def test_a_declared_length_over_the_cap_is_refused_before_the_body_is_sent(
    stack: Stack, create_url: str
) -> None:
    assert stack.client is not None
    address = urlparse(stack.api_url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as conn:
        conn.sendall(
            f"POST {create_url} HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: {basic(stack.client.client_id, stack.client.secret)}\r\n"
            "Content-Type: application/json\r\nContent-Length: 209715200\r\n\r\n".encode()
        )
        received = b""
        while chunk := conn.recv(65536):  # not one byte of the body sent; the API hangs up
            received += chunk
        answer = received.decode(errors="replace")

    assert answer.startswith("HTTP/1.1 413"), answer
    assert '"code":11' in answer.replace(" ", "")


def test_a_chunked_body_is_cut_off_at_the_cap(api: httpx.Client, create_url: str) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"body": {"name": "'
        for _ in range(80):
            yield b"x" * 65536  # 5 MiB in all

    response = api.post(create_url, content=chunks(), headers={"Content-Type": "application/json"})

    assert spec_error(response, 413)["code"] == 11


def test_a_trailing_slash_is_a_404_not_a_redirect_built_from_host(
    api: httpx.Client, create_url: str
) -> None:
    response = api.post(create_url + "/", json={"body": {}}, headers={"Host": "evil.example"})

    assert spec_error(response, 404)["code"] == 5
    assert "location" not in response.headers


def test_no_hostile_body_leaves_a_traceback_in_the_api_log(
    stack: Stack, api: httpx.Client, create_url: str
) -> None:
    post_raw(api, create_url, b"[" * 5000 + b"]" * 5000)
    post_raw(api, create_url, b'{"body": {"name": "\\u0000"}}')

    log = (stack.workdir / "api.log").read_text(errors="replace")
    assert "Traceback" not in log


def test_endless_header_lines_are_cut_off_and_the_api_keeps_answering(
    stack: Stack, api: httpx.Client
) -> None:
    address = urlparse(stack.api_url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        answer = b""
        try:
            for _ in range(64):  # 4 MiB of header lines, if the server kept reading
                conn.sendall(b"X-Padding: " + b"a" * 65536 + b"\r\n")
        except OSError:
            pass  # the server hung up on us
        try:
            answer = conn.recv(65536)
        except OSError:
            answer = b""

    assert not answer.startswith(b"HTTP/1.1 200")
    assert api.get("/healthz").status_code == 200


def read_answer(conn: socket.socket) -> bytes:
    """Everything the server sends until it hangs up."""
    answer = b""
    while chunk := conn.recv(65536):
        answer += chunk
    return answer


@pytest.mark.parametrize(
    ("head", "status"),
    [
        pytest.param(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Note: a\x00b\r\n\r\n", 400, id="nul"),
        pytest.param(
            b"POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
            400,
            id="content-length-abc",
        ),
        pytest.param(
            b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Note: " + b"a" * 70_000 + b"\r\n",
            431,
            id="unfinished-head-over-64-KiB",
        ),
    ],
)
def test_a_request_that_is_not_http_gets_the_spec_s_error_body_not_plain_text(
    stack: Stack, api: httpx.Client, head: bytes, status: int
) -> None:
    address = urlparse(stack.api_url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as conn:
        with contextlib.suppress(OSError):  # the server may hang up before it read it all
            conn.sendall(head)
        answer = read_answer(conn)

    response_head, _, body = answer.partition(b"\r\n\r\n")
    assert response_head.startswith(f"HTTP/1.1 {status} ".encode()), answer
    assert b"content-type: application/json" in response_head.lower()
    error = json.loads(body)
    assert set(error) == {"code", "message", "details"}
    assert error["code"] == 3
    assert b"\x00" not in body  # nothing of the request echoed
    assert b"abc" not in body
    assert api.get("/healthz").status_code == 200


def test_a_request_head_sent_too_slowly_gets_a_408_and_is_disconnected(
    stack: Stack, api: httpx.Client
) -> None:
    address = urlparse(stack.api_url)
    with socket.create_connection((address.hostname, address.port), timeout=15) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        try:
            for _ in range(40):  # one header byte every 0.25 s: 10 s, if the server waited
                conn.sendall(b"X")
                time.sleep(0.25)
        except OSError:
            pass  # the server hung up on us
        answer = read_answer(conn)

    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408")
    assert json.loads(body)["code"] == 4  # DEADLINE_EXCEEDED, in the spec's error body
    assert api.get("/healthz").status_code == 200


def test_a_body_sent_too_slowly_gets_a_408_without_a_traceback(
    stack: Stack, create_url: str
) -> None:
    address = urlparse(stack.api_url)
    client = stack.new_client("slow-body")
    credentials = basic(client.client_id, client.secret)
    with socket.create_connection((address.hostname, address.port), timeout=15) as conn:
        conn.sendall(
            f"POST {create_url} HTTP/1.1\r\nHost: x\r\nAuthorization: {credentials}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{".encode()
        )
        answer = read_answer(conn)

    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408")
    assert set(json.loads(body)) == {"code", "message", "details"}
    assert "Traceback" not in (stack.workdir / "api.log").read_text(errors="replace")


def test_a_connection_that_sends_nothing_is_closed(stack: Stack) -> None:
    address = urlparse(stack.api_url)
    with socket.create_connection((address.hostname, address.port), timeout=15) as conn:
        assert read_answer(conn) == b""


def test_repeated_failed_logins_of_a_client_id_are_refused_without_a_hash(
    stack: Stack,
) -> None:
    victim = stack.new_client(f"victim-{uuid.uuid4().hex[:6]}")
    with stack.http(victim) as verified:
        assert verified.get(f"/v1beta1/commands/{uuid.uuid4()}").status_code == 404  # cached
    with httpx.Client(base_url=stack.api_url, auth=(victim.client_id, "wrong")) as attacker:
        statuses = [attacker.get("/v1beta1/commands/x").status_code for _ in range(10)]
        throttled = attacker.get("/v1beta1/commands/x")

    assert statuses == [401] * 10
    assert throttled.elapsed.total_seconds() >= 1.0  # held before it was sent
    body = spec_error(throttled, 429)
    assert body["code"] == 8
    assert 1 <= int(throttled.headers["Retry-After"]) <= 60
    # The client itself, verified before, is not locked out by someone guessing its secret.
    with stack.http(victim) as verified:
        assert verified.get(f"/v1beta1/commands/{uuid.uuid4()}").status_code == 404


def test_the_docs_page_loads_its_assets_from_the_api_itself(stack: Stack) -> None:
    page = httpx.get(f"{stack.api_url}/docs", timeout=10)

    assert page.status_code == 200
    sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert sources
    assert all(source.startswith("/") for source in sources), sources
    for source in sources:
        assert httpx.get(f"{stack.api_url}{source}", timeout=10).status_code == 200, source
