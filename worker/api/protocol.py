"""uvicorn's h11 protocol with a deadline for reading each request, and the spec's error body
for a request h11 cannot read.

uvicorn bounds how long an idle keep-alive connection lives, but not how long a client may
take to send a request: a client that sends one header byte every few seconds, or connects
and sends nothing, holds its connection (and a slot of the process) for ever. Here every
request must arrive whole, head and body, within ``api_read_timeout_seconds`` of its first
byte (or of the connection, for its first request). A client that misses the deadline gets
a 408 with the spec's error body, when no response has begun, and is disconnected.

A request that is not HTTP/1.1 as h11 reads it (a NUL or a line break in a header value,
``Content-Length: abc``, a head over the size cap) never reaches the application: uvicorn
answers it itself, in plain text. Here that answer carries the spec's error body instead
(``400 INVALID_ARGUMENT``, ``431`` for a head over the cap), naming no byte of the request.

Used as ``uvicorn --http worker.api.protocol:ReadDeadlineH11Protocol``; it keeps h11's cap on
the size of an incomplete request head.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from domain.errors import ErrorCode, error_info
from worker.settings import get_settings


def request_timeout_response(seconds: float) -> bytes:
    """A complete HTTP/1.1 408 carrying the spec's error body (section 7)."""
    body = json.dumps(
        {
            "code": int(ErrorCode.DEADLINE_EXCEEDED),
            "message": f"the request was not received within {seconds:g}s",
            "details": [],
        }
    ).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode()
    return head + body


def malformed_request_response(status: int) -> bytes:
    """A complete HTTP/1.1 answer (400, or 431 for a head too large) to a request h11 could
    not read, with the spec's error body; the connection is closed after it."""
    too_large = status == 431
    body = json.dumps(
        {
            "code": int(ErrorCode.INVALID_ARGUMENT),
            "message": "the request head is larger than the server reads"
            if too_large
            else "the request is not valid HTTP/1.1",
            "details": [
                error_info("REQUEST_HEAD_TOO_LARGE" if too_large else "MALFORMED_HTTP_REQUEST")
            ],
        }
    ).encode()
    reason = "Request Header Fields Too Large" if too_large else "Bad Request"
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode()
    return head + body


class ReadDeadlineH11Protocol(H11Protocol):
    """An h11 connection whose every request must be read within a deadline."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read_timeout = get_settings().api_read_timeout_seconds
        self._read_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_read_deadline()

    def data_received(self, data: bytes) -> None:
        # The first byte of a new request starts its deadline; bytes of a request already
        # under way do not extend it.
        if self._read_deadline is None and self.conn.their_state is h11.IDLE:
            self._start_read_deadline()
        super().data_received(data)

    def on_response_complete(self) -> None:
        self._cancel_read_deadline()
        super().on_response_complete()
        # A request answered before its body was read, or the next pipelined one begun.
        if not self.transport.is_closing() and self._request_under_way():
            self._start_read_deadline()

    def send_400_response(self, msg: str) -> None:
        # Called by uvicorn while it handles h11's RemoteProtocolError: its status hint says
        # whether the head was too large (431) or malformed (400).
        error = sys.exc_info()[1]
        hint = getattr(error, "error_status_hint", 400)
        self._cancel_read_deadline()
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None:
            cycle.disconnected = True  # the application's own answer goes nowhere
            if cycle.response_started:  # too late for an answer of our own: hang up
                self.transport.close()
                return
        self.transport.write(malformed_request_response(431 if hint == 431 else 400))
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_read_deadline()
        super().connection_lost(exc)

    def _request_under_way(self) -> bool:
        state = self.conn.their_state
        return state is h11.SEND_BODY or (state is h11.IDLE and bool(self.conn.trailing_data[0]))

    def _start_read_deadline(self) -> None:
        self._cancel_read_deadline()
        self._read_deadline = self.loop.call_later(self.read_timeout, self._read_deadline_passed)

    def _cancel_read_deadline(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _read_deadline_passed(self) -> None:
        self._read_deadline = None
        if self.transport.is_closing():
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            if self.conn.trailing_data[0]:  # part of a head; a silent connection just closes
                self.transport.write(request_timeout_response(self.read_timeout))
        elif state is h11.SEND_BODY:
            cycle = self.cycle
            if cycle is not None and not cycle.response_started:
                cycle.disconnected = True  # the application's own answer goes nowhere
                self.transport.write(request_timeout_response(self.read_timeout))
        else:
            return  # the request is in: its handling takes the time it takes
        peer = "%s:%d" % self.client if self.client else "a client"  # noqa: UP031
        self.logger.info("%s - request not received in time, disconnected", peer)
        self.transport.close()
