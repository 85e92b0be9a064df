"""The Stripe API front: a raw ASGI app handling every non-admin request.

Order of processing, which decides what a client observes (and what is stored under an
idempotency key, see :mod:`stripe_emulator.idempotency`):

1. authentication (401), ``Stripe-Version`` check, rate limiter (429), routing (404),
   parsing the form/query parameters;
2. idempotency: replay a stored response, or 400 on a key reused with other parameters or
   another endpoint, or 409 if the key is held by a request still executing;
3. faults planned for the request (:mod:`stripe_emulator.faults`) that act before
   execution: latency, error responses, dropped or hung connections;
4. parameter validation against the endpoint schema and ``expand[]`` check (400);
5. execution, then ``expand[]``; the response is stored under the idempotency key; what a
   write changed is recorded as events naming the request (:mod:`stripe_emulator.events`);
6. faults that act after execution.

Every request is appended to the request log, including dropped and hung ones.

This sits outside Starlette's middleware on purpose: it is the hot path (the emulator must
sustain hundreds of creates per second on two shared cores), and dropping a connection needs
uvicorn's own ``send`` callable, whose transport it closes.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any, Final

from stripe_emulator import errors, expand
from stripe_emulator.config import API_VERSION
from stripe_emulator.emulator import Emulator
from stripe_emulator.errors import StripeError
from stripe_emulator.faults import ERROR_KINDS, FaultRule
from stripe_emulator.forms import parse_form
from stripe_emulator.idempotency import MAX_KEY_LENGTH, Scope, Stored
from stripe_emulator.ids import new_id
from stripe_emulator.resources.common import Ctx, Endpoint

logger = logging.getLogger("stripe_emulator")

# ``2026-10-28.endive``, optionally with beta flags: ``2025-09-30.preview; some_beta=v1``.
_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}(\.[a-z]+)?(;\s*\w+=v\d+)*\Z")
_JSON: Final = (b"content-type", b"application/json")
_REPLAYED: Final = (b"idempotent-replayed", b"true")
_DEFAULT_VERSION: Final = API_VERSION.encode()

ASGIScope = dict[str, Any]
Message = dict[str, Any]


@dataclass(slots=True)
class Outcome:
    """What to answer: a response, or ``drop`` (close the connection without one)."""

    status: int = 200
    body: bytes = b""
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    drop: bool = False
    error: StripeError | None = None
    replayed: bool = False


_DROP: Final = Outcome(drop=True)


@dataclass(slots=True)
class Request:
    method: str
    path: str
    request_id: str
    now: int
    query: dict[str, Any]
    form: dict[str, Any]
    idempotency_key: str | None
    version: bytes
    fault: str | None = None


class StripeAPI:
    """ASGI application serving Stripe's ``/v1`` API from an :class:`Emulator`."""

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator

    async def __call__(self, scope: ASGIScope, receive: Any, send: Any) -> None:
        body = await _read_body(receive)
        started = time.perf_counter()
        wall = time.time()
        emulator = self.emulator
        now = emulator.tick()
        headers = _headers(scope)
        version = headers.get("stripe-version")
        request = Request(
            method=scope["method"],
            path=scope["path"],
            request_id=new_id("req"),
            now=now,
            query={},
            form={},
            idempotency_key=headers.get("idempotency-key"),
            version=version.encode() if version else _DEFAULT_VERSION,
        )
        try:
            outcome = await self._process(request, headers, scope, body)
        except Exception:  # a bug in the emulator: answer like Stripe's 500, keep serving
            logger.exception("emulator failure on %s %s", request.method, request.path)
            outcome = self._error(request, errors.api_error(500))
        error = outcome.error
        # Logged before answering: whoever sees the answer (or the dropped connection) can
        # already read the entry through the admin API.
        emulator.log.append(
            {
                "request_id": request.request_id,
                "method": request.method,
                "path": request.path,
                "query": request.query,
                "form": request.form,
                "idempotency_key": request.idempotency_key,
                "stripe_version": version,
                "status": None if outcome.drop else outcome.status,
                "error_type": error.type if error else None,
                "error_code": error.code if error else None,
                "fault": request.fault,
                "replayed": outcome.replayed,
                "dropped": outcome.drop,
                "wall_time": wall,
                "emulator_time": now,
                "duration_ms": (time.perf_counter() - started) * 1000.0,
            }
        )
        if outcome.drop:
            await _drop_connection(send)
            return
        await send(
            {"type": "http.response.start", "status": outcome.status, "headers": outcome.headers}
        )
        await send({"type": "http.response.body", "body": outcome.body})

    async def _process(
        self, request: Request, headers: dict[str, str], scope: ASGIScope, body: bytes
    ) -> Outcome:
        emulator = self.emulator
        host = headers.get("host")
        if host:  # the hosted invoice pages are linked at the address the clients use
            emulator.store.public_url = f"{scope.get('scheme', 'http')}://{host}"
        try:
            api_key = self._authenticate(headers.get("authorization"))
            version = headers.get("stripe-version")
            if version is not None and not _VERSION.match(version):
                raise errors.invalid(f"Invalid Stripe API version: {version}")
            if "stripe-account" in headers:
                raise errors.invalid(
                    "The Stripe emulator does not support Connect (the Stripe-Account header)."
                )
            if not emulator.limiter.allow(request.method):
                request.fault = "rate_limiter"
                raise errors.rate_limited()
            route = emulator.router.match(request.method, request.path)
            if route is None:
                raise errors.unrecognized_url(request.method, request.path)
            request.query = parse_form(scope["query_string"].decode("latin-1"))
            if request.method == "POST":
                request.form = self._form(headers.get("content-type"), body)
        except StripeError as error:
            return self._error(request, error)
        endpoint, path_params = route
        params = {**request.query, **request.form} if request.form else request.query

        key = request.idempotency_key if request.method == "POST" else None
        if key is None:
            return await self._execute(request, endpoint, path_params, params, None)
        if len(key) > MAX_KEY_LENGTH:
            return self._error(
                request,
                errors.invalid(
                    f"Idempotency-Key must be at most {MAX_KEY_LENGTH} characters long."
                ),
            )
        scope_key: Scope = (api_key, key)
        name = f"{request.method} {request.path}"
        stored = emulator.idempotency.get(scope_key)
        if stored is not None:
            if stored.endpoint != name:
                return self._error(
                    request, errors.idempotency_endpoint_mismatch(key, stored.endpoint, name)
                )
            if stored.params != params:
                return self._error(request, errors.idempotency_params_mismatch(key))
            if (rule := emulator.faults.plan_replay(request.method, request.path)) is not None:
                request.fault = f"{rule.kind}(replay)"
                return _DROP if rule.kind == "drop" else self._error(request, rule.error())
            return self._replay(request, stored)
        if emulator.idempotency.in_flight(scope_key) is not None:
            return self._error(request, errors.idempotency_key_in_use())
        emulator.idempotency.begin(scope_key, name, params)
        try:
            return await self._execute(request, endpoint, path_params, params, scope_key)
        finally:
            emulator.idempotency.end(scope_key)

    async def _execute(
        self,
        request: Request,
        endpoint: Endpoint,
        path_params: dict[str, str],
        params: dict[str, Any],
        scope_key: Scope | None,
    ) -> Outcome:
        emulator = self.emulator
        plan = emulator.faults.plan(request.method, request.path)
        rule: FaultRule | None = None
        if plan is not None:
            request.fault = plan.names
            rule = plan.rule
            if plan.latency_before_ms:
                await asyncio.sleep(plan.latency_before_ms / 1000.0)
            if rule is not None and not rule.after_execution:
                if rule.kind == "drop":
                    return _DROP
                if rule.kind == "hang":
                    await emulator.faults.hang(rule.hang_seconds)
                    return _DROP
                return self._error(request, rule.error())

        try:
            typed = endpoint.schema.validate(params)
            expand_paths: list[str] = typed.get("expand", [])
            if expand_paths:
                expand.check(endpoint.returns, expand_paths)
        except StripeError as error:
            return self._error(request, error)  # validation failed: nothing executed or stored

        # Latency may have let time pass: the write happens at the current emulator time.
        ctx = Ctx(
            emulator.store,
            emulator.tick() if plan else request.now,
            path_params,
            request.version.decode(),
        )
        events = emulator.store.events
        writing = request.method != "GET"
        if writing:  # what the handler changes is recorded as caused by this request
            events.begin(ctx.now, request.request_id, scope_key[1] if scope_key else None)
        try:
            payload = endpoint.handler(ctx, typed)
            if expand_paths or "total_count" in payload:
                payload = expand.apply(emulator.store, endpoint.returns, payload, expand_paths)
            outcome = self._json(request, 200, payload)
        except StripeError as error:
            outcome = self._error(request, error)
        finally:
            if writing:
                events.end()

        if rule is not None and rule.kind in ERROR_KINDS:  # after execution (see above)
            injected = rule.error()
            if rule.should_retry is None and scope_key is not None:
                # Retrying cannot help: the key now replays this 500 (Stripe says "false" too).
                injected.headers["Stripe-Should-Retry"] = "false"
            outcome = self._error(request, injected)
        if scope_key is not None:
            emulator.idempotency.save(
                scope_key,
                Stored(
                    endpoint=f"{request.method} {request.path}",
                    params=params,
                    status=outcome.status,
                    body=outcome.body,
                    headers=_replayable(outcome.headers),
                    request_id=request.request_id,
                    created=ctx.now,
                ),
            )
        if plan is not None and plan.latency_after_ms:
            await asyncio.sleep(plan.latency_after_ms / 1000.0)
        if rule is not None and rule.kind == "drop":
            return _DROP
        if rule is not None and rule.kind == "hang":
            await emulator.faults.hang(rule.hang_seconds)
            return _DROP
        return outcome

    # Helpers ---------------------------------------------------------------------------------

    def _authenticate(self, authorization: str | None) -> str:
        if not authorization:
            raise errors.missing_api_key()
        scheme, _, credentials = authorization.partition(" ")
        scheme = scheme.lower()
        if scheme == "bearer":
            key = credentials.strip()
        elif scheme == "basic":  # curl -u sk_test_...: sends the key as the user name
            try:
                key = base64.b64decode(credentials.strip()).decode().partition(":")[0]
            except (binascii.Error, UnicodeDecodeError):
                key = credentials
        else:
            raise errors.invalid_api_key(authorization)
        if not key:
            raise errors.missing_api_key()
        if key not in self.emulator.api_keys:
            raise errors.invalid_api_key(key)
        return key

    @staticmethod
    def _form(content_type: str | None, body: bytes) -> dict[str, Any]:
        if not body:
            return {}
        if content_type is not None:
            media_type = content_type.partition(";")[0].strip().lower()
            if media_type != "application/x-www-form-urlencoded":
                raise errors.invalid(
                    f"Invalid request: unsupported Content-Type {media_type}. If error persists "
                    "and you need assistance, please contact support@stripe.com."
                )
        return parse_form(body.decode("utf-8", errors="replace"))

    def _base_headers(self, request: Request, length: int) -> list[tuple[bytes, bytes]]:
        headers = [
            _JSON,
            (b"content-length", str(length).encode()),
            (b"request-id", request.request_id.encode()),
            (b"stripe-version", request.version),
        ]
        if request.idempotency_key is not None and request.method == "POST":
            headers.append((b"idempotency-key", request.idempotency_key.encode()))
        return headers

    def _json(
        self,
        request: Request,
        status: int,
        payload: dict[str, Any],
        extra: dict[str, str] | None = None,
    ) -> Outcome:
        body = json.dumps(payload, separators=(",", ":")).encode()
        headers = self._base_headers(request, len(body))
        if request.idempotency_key is not None and request.method == "POST":
            headers.append((b"original-request", request.request_id.encode()))
        if extra:
            headers.extend((name.lower().encode(), value.encode()) for name, value in extra.items())
        return Outcome(status, body, headers)

    def _error(self, request: Request, error: StripeError) -> Outcome:
        outcome = self._json(
            request, error.status, error.body(request.request_id, request.now), error.headers
        )
        outcome.error = error
        return outcome

    def _replay(self, request: Request, stored: Stored) -> Outcome:
        headers = self._base_headers(request, len(stored.body))
        headers.append((b"original-request", stored.request_id.encode()))
        headers.extend(stored.headers)
        headers.append(_REPLAYED)
        outcome = Outcome(stored.status, stored.body, headers, replayed=True)
        if stored.status >= 400:
            error = json.loads(stored.body)["error"]
            outcome.error = StripeError(
                stored.status, error["message"], type_=error["type"], code=error["code"]
            )
        return outcome


_PER_REQUEST_HEADERS: Final = frozenset(
    {b"content-type", b"content-length", b"request-id", b"stripe-version", b"idempotency-key",
     b"original-request"}
)  # fmt: skip


def _replayable(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The headers a replay repeats (``Stripe-Should-Retry``...), not the per-request ones."""
    return [(name, value) for name, value in headers if name not in _PER_REQUEST_HEADERS]


_WANTED_HEADERS: Final = frozenset(
    {
        b"authorization",
        b"idempotency-key",
        b"stripe-version",
        b"content-type",
        b"stripe-account",
        b"host",
    }
)


def _headers(scope: ASGIScope) -> dict[str, str]:
    return {
        name.decode(): value.decode("latin-1")
        for name, value in scope["headers"]
        if name in _WANTED_HEADERS
    }


async def _read_body(receive: Any) -> bytes:
    message: Message = await receive()
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return body
    chunks = [body]
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _drop_connection(send: Any) -> None:
    """Close the client's connection without a response (uvicorn's send knows its transport)."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None:
        raise RuntimeError("dropping a connection needs uvicorn's HTTP protocol")
    transport.close()
    # Let uvicorn see the connection as lost before this app returns, so it does not try to
    # answer with its own 500.
    for _ in range(3):
        await asyncio.sleep(0)
