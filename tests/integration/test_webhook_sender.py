"""The Standard Webhooks sender over real HTTP, to a real receiver on this machine."""

from __future__ import annotations

import contextlib
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from domain.webhooks import new_secret
from tests.support.webhook_receiver import WebhookReceiver
from worker.outbound.webhooks import HttpWebhookSender

BODY = b'{"id":"evt_1","type":"user.enabled"}'


def test_a_delivery_is_signed_as_the_receiver_verifies_it_with_each_secret() -> None:
    current, previous = new_secret(), new_secret()
    with WebhookReceiver() as receiver:
        receiver.secret = previous  # a receiver that has not switched to the new secret yet
        response = HttpWebhookSender(allow_private_networks=True).send(
            receiver.url,
            message_id="evt_1",
            body=BODY,
            secrets=[current, previous],
            timeout_seconds=5,
        )

    assert response.ok
    (received,) = receiver.requests
    assert received.verified
    assert received.body == BODY
    assert received.webhook_id == "evt_1"
    assert len(received.headers["webhook-signature"].split(" ")) == 2


def test_a_receiver_on_a_private_address_is_not_requested_unless_allowed() -> None:
    with WebhookReceiver() as receiver:
        receiver.secret = new_secret()
        response = HttpWebhookSender(allow_private_networks=False).send(
            receiver.url,
            message_id="evt_1",
            body=BODY,
            secrets=[receiver.secret],
            timeout_seconds=5,
        )

    assert response.status is None
    assert response.error is not None
    assert "not a public address" in response.error
    assert receiver.requests == []


class _Trickling(BaseHTTPRequestHandler):
    """Answers 500 with terminal escapes and line breaks, announces 100 MB and sends a
    byte every 0.2 s: a receiver that would hold a worker."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(500)
        self.send_header("content-length", str(100_000_000))
        self.end_headers()
        self.wfile.write(b"\x1b[31mboom\r\nforged: line for billing@acme.example\n")
        self.wfile.flush()
        with contextlib.suppress(OSError):
            for _ in range(200):
                time.sleep(0.2)
                self.wfile.write(b"x")
                self.wfile.flush()

    def log_message(self, *args: object) -> None:
        pass


def test_a_receiver_that_trickles_a_huge_answer_costs_at_most_twice_the_timeout_and_one_line() -> (
    None
):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Trickling)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    started = time.monotonic()
    try:
        response = HttpWebhookSender(allow_private_networks=True).send(
            url, message_id="evt_1", body=BODY, secrets=[new_secret()], timeout_seconds=1
        )
    finally:
        server.shutdown()
    elapsed = time.monotonic() - started

    assert response.status == 500
    assert elapsed < 4
    assert response.error is not None
    assert response.error.startswith("HTTP 500: [31mboom forged: line for b***@acme.example")
    assert response.error.isprintable()
