"""A webhook receiver for the emulator tests: a real HTTP server in the test process.

It records every request's raw body and headers, answers with the statuses it is told to
(200 by default), and verifies signatures with the SDK's own ``stripe.Webhook.construct_event``
(the contract test of the emulator's signatures).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin


@dataclass(frozen=True)
class Received:
    """One request the receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # wall clock

    @property
    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.body)
        return data

    @property
    def event_id(self) -> str:
        return str(self.payload["id"])

    @property
    def type(self) -> str:
        return str(self.payload["type"])

    def verified(self, secret: str) -> stripe.Event:
        """The event, through ``stripe.Webhook.construct_event`` (raises if the signature or
        its timestamp is not accepted)."""
        event: stripe.Event = stripe.Webhook.construct_event(
            self.body, self.headers.get("stripe-signature"), secret
        )
        return event


class Receiver:
    """An HTTP server on 127.0.0.1 (a free port) recording what it receives."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._statuses: deque[int] = deque()
        self._lock = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else each keep-alive answer waits ~40 ms

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                status = receiver._record(
                    Received(
                        self.path,
                        {name.lower(): value for name, value in self.headers.items()},
                        body,
                        time.time(),
                    )
                )
                answer = b'{"received": true}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{port}/webhooks"

    def _record(self, received: Received) -> int:
        with self._lock:
            self.received.append(received)
            status = self._statuses.popleft() if self._statuses else 200
            self._lock.notify_all()
            return status

    def answer(self, *statuses: int) -> None:
        """Answer the next requests with these statuses (then 200 again)."""
        with self._lock:
            self._statuses.extend(statuses)

    def wait_for(self, done: Callable[[list[Received]], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        with self._lock:
            while not done(self.received):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"receiver got {len(self.received)} requests")
                self._lock.wait(remaining)

    def types(self) -> list[str]:
        return [received.type for received in list(self.received)]

    def of_type(self, *types: str) -> list[Received]:
        return [received for received in list(self.received) if received.type in types]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass
class Hook:
    """A receiver registered as a webhook endpoint of the emulator (or of Stripe)."""

    receiver: Receiver
    endpoint_id: str
    secret: str
    admin: EmulatorAdmin

    def settle(self, timeout: float = 15.0) -> list[Received]:
        """Wait until the emulator has nothing left to deliver; what was received."""
        self.admin.wait_for_deliveries(timeout)
        return list(self.receiver.received)

    def events(self) -> Iterator[stripe.Event]:
        """Every received event, each signature verified with the SDK."""
        for received in list(self.receiver.received):
            yield received.verified(self.secret)


def register(
    receiver: Receiver, client: stripe.StripeClient, admin: EmulatorAdmin, **params: Any
) -> Hook:
    """Register ``receiver`` as a webhook endpoint (every event type unless told otherwise)."""
    params.setdefault("enabled_events", ["*"])
    endpoint = client.v1.webhook_endpoints.create(
        params={"url": receiver.url, **params}  # type: ignore[typeddict-item]
    )
    assert endpoint.secret is not None
    return Hook(receiver, endpoint.id, endpoint.secret, admin)
