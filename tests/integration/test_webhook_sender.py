"""The Standard Webhooks sender over real HTTP, to a real receiver on this machine."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from adapters.outbound.webhooks import HttpWebhookSender
from domain.webhooks import new_secret
from tests.support.stack import patience
from tests.support.webhook_receiver import WebhookReceiver

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


TRICKLES = 200
"""Bytes a trickling receiver sends, one every 0.2 s: 40 s in all, unless hung up on."""


class _TricklingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Trickling)
        self.trickled = 0
        self.hung_up = threading.Event()


class _Trickling(BaseHTTPRequestHandler):
    """Answers 500 with terminal escapes and line breaks, announces 100 MB and sends a
    byte every 0.2 s: a receiver that would hold a worker."""

    server: _TricklingServer

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(500)
        self.send_header("content-length", str(100_000_000))
        self.end_headers()
        self.wfile.write(b"\x1b[31mboom\r\nforged: line for billing@acme.example\n")
        self.wfile.flush()
        try:
            for _ in range(TRICKLES):
                time.sleep(0.2)
                self.wfile.write(b"x")
                self.wfile.flush()
                self.server.trickled += 1
        except OSError:
            self.server.hung_up.set()

    def log_message(self, *args: object) -> None:
        pass


def test_a_receiver_that_trickles_a_huge_answer_is_hung_up_on_and_costs_one_line() -> None:
    server = _TricklingServer()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    try:
        response = HttpWebhookSender(allow_private_networks=True).send(
            url, message_id="evt_1", body=BODY, secrets=[new_secret()], timeout_seconds=1
        )
        # The sender hung up before the answer's end: the receiver's next writes fail.
        assert server.hung_up.wait(patience() * 30)
    finally:
        server.shutdown()

    assert server.trickled < TRICKLES
    assert response.status == 500
    assert response.error is not None
    assert response.error.startswith("HTTP 500: [31mboom forged: line for b***@acme.example")
    assert response.error.isprintable()
