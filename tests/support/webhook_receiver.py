"""A real webhook receiver for the tests: a stdlib HTTP server on 127.0.0.1 (a free port) in
a thread, verifying every request as a receiver would (``standardwebhooks``) and answering
what the test scripts."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

PATH = "/hook"


@dataclass(frozen=True)
class Received:
    """One request as it arrived, and what the receiver answered."""

    headers: dict[str, str]
    body: bytes
    verified: bool
    status: int

    @property
    def event(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.body)
        return loaded

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


class WebhookReceiver:
    """Answers 500 to its first ``failures`` requests (every one with ``always_fail``), then
    200; a request whose signature does not verify with ``secret`` gets 401."""

    def __init__(self, *, failures: int = 0, always_fail: bool = False) -> None:
        self.secret: str | None = None
        self.requests: list[Received] = []
        self._failures = failures
        self._always_fail = always_fail
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{PATH}"

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def received(self) -> list[Received]:
        with self._lock:
            return list(self.requests)

    def accepted(self) -> list[Received]:
        """The requests answered 2xx."""
        return [request for request in self.received() if request.status == 200]

    def _answer(self, headers: dict[str, str], body: bytes) -> Received:
        try:
            assert self.secret is not None, "the test registers the endpoint first"
            Webhook(self.secret).verify(body, headers)
            verified = True
        except (WebhookVerificationError, ValueError, AssertionError):
            verified = False
        with self._lock:
            if not verified:
                status = 401
            elif self._always_fail or self._failures > 0:
                self._failures -= 1
                status = 500
            else:
                status = 200
            received = Received(headers, body, verified, status)
            self.requests.append(received)
        return received

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                headers = {key.lower(): value for key, value in self.headers.items()}
                received = receiver._answer(headers, body) if self.path == PATH else None
                status = 404 if received is None else received.status
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: the test reads ``requests``

        return Handler
