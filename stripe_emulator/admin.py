"""The emulator's admin API, under ``/_emulator`` (JSON in, JSON out, no Stripe auth).

It is never reachable through ``/v1/...`` and is not counted by the rate limiter or the request
log. Errors are ``400 {"error": "<message>"}`` (``404`` for an unknown fault, delivery fault,
customer or webhook endpoint id).

==========  ====================================  ============================================
Method      Path                                  Effect
==========  ====================================  ============================================
GET         /_emulator/health                     ``{"status": "ok", "now", "api_version"}``
POST        /_emulator/reset                      forget all data (invoices, failing customers,
                                                  dunning rules, events and webhook endpoints
                                                  included), idempotency keys, faults, deliveries
                                                  (and delivery faults, pause, retry schedule), the
                                                  logs and the clock offset; rate limit back to the
                                                  configured value; release hung requests
GET         /_emulator/clock                      ``{"now": <emulator unix time>, "offset": s}``
POST        /_emulator/clock/advance              body ``{"seconds": n}`` (n >= 0): move time
                                                  forward; what fell due meanwhile happens in time
                                                  order (renewals and their invoices, payment
                                                  retries, trial ends, cancels, expiries), their
                                                  events recorded and delivered in the background;
                                                  answers the clock plus ``rolled`` (timeline
                                                  entries applied)
POST        /_emulator/clock/set                  body ``{"time": unix_ts}``: jump forward to ts
POST        /_emulator/clock/reset                back to the wall clock (offset 0), data kept:
                                                  the one way time goes backwards; what was made
                                                  ahead keeps its times and falls due when the
                                                  wall clock gets there
GET         /_emulator/faults                     ``{"faults": [rule, ...]}``
POST        /_emulator/faults                     body: a rule (``kind`` required; ``match``,
                                                  ``probability``, ``count``, ``after_execution``,
                                                  ``latency_ms``, ``hang_seconds``, ``status``,
                                                  ``should_retry``, ``retry_after``, ``replays``):
                                                  answers the rule with its ``id`` (faults.py)
DELETE      /_emulator/faults                     remove every rule (and release hung requests)
DELETE      /_emulator/faults/{id}                remove one rule
POST        /_emulator/faults/seed                body ``{"seed": int}``: reseed the RNGs of the
                                                  request faults and of the delivery faults
GET         /_emulator/rate_limit                 ``{"per_second": x}`` (0 = off)
POST        /_emulator/rate_limit                 body ``{"per_second": x}``
GET         /_emulator/requests                   ``{"requests": [entry, ...]}``, oldest first;
                                                  query ``path_prefix`` and ``method`` filter
DELETE      /_emulator/requests                   clear the request log
POST        /_emulator/state/save                 write the state file now (400 if none is set)
POST        /_emulator/bulk/subscriptions         a benchmark fixture (bulk.py): body ``{"count",
                                                  "customer_id", "subscription_id", "item_id"
                                                  (patterns of ``{i}``), "prices": [price ids]
                                                  (subscription i on ``prices[i % len]``),
                                                  "current_period_start", "current_period_end"}``
                                                  and optional ``start`` (first i, default 0),
                                                  ``price_overrides`` (``{"i": price id}``),
                                                  ``created``; the period must end after now:
                                                  makes customer i with its active
                                                  subscription i directly in the store, with no
                                                  events, invoices or request-log entries;
                                                  or, instead of ``count``, ``start`` and
                                                  ``price_overrides``, ``"rows": [{"i", "price",
                                                  "status", "current_period_start",
                                                  "current_period_end", "created"}]`` (only
                                                  ``i`` required, the rest falling back to
                                                  ``prices[i % len]``, ``active`` and the body's
                                                  period and ``created``; status ``active``,
                                                  ``past_due`` or ``canceled``; only a canceled
                                                  row's period may be over); all or nothing;
                                                  answers
                                                  ``{"customers", "subscriptions", "first",
                                                  "last", "seconds"}``
POST        /_emulator/bulk/prices                a benchmark fixture (fixture_prices.py): body
                                                  ``{"prices": [{"id", "product", "unit_amount",
                                                  "currency", "interval"}]}``: recurring prices
                                                  with the ids given (the API makes its own),
                                                  their products made if missing; all or
                                                  nothing; answers ``{"prices": [ids]}``
GET         /_emulator/payments                   ``{"failing": [customer ids], "authenticating":
                                                  [customer ids]}``: customers whose payments
                                                  fail, or need their authentication
POST        /_emulator/payments/fail              body ``{"customer": "cus_..."}``: every later
                                                  payment attempt of the customer fails
                                                  (``card_declined``), retries of its open
                                                  invoices included; answers ``{"customer",
                                                  "failing": true}``
POST        /_emulator/payments/succeed           body ``{"customer": "cus_..."}``: payments succeed
                                                  again and the customer's open
                                                  ``charge_automatically`` invoices are paid now
                                                  (their subscriptions back to ``active``, pending
                                                  updates applied); answers ``{"customer",
                                                  "failing": false, "paid": [invoice ids]}``
POST        /_emulator/payments/require_authentication
                                                  body ``{"customer": "cus_..."}``: every later
                                                  payment attempt needs the customer's
                                                  authentication on the invoice's hosted page
                                                  (``/_emulator/hosted_invoices/{id}``: see
                                                  cards.py and hosted_invoices.py)
GET         /_emulator/dunning                    the retry rules of failed invoices:
                                                  ``{"retries", "retry_interval_seconds",
                                                  "final_status"}``
POST        /_emulator/dunning                    body: any of those three (``retries`` >= 0,
                                                  ``retry_interval_seconds`` > 0, ``final_status``
                                                  one of ``past_due``, ``unpaid``, ``canceled``):
                                                  answers the rules now in force
GET         /_emulator/webhooks                   delivery state: ``{"paused", "idle", "queued",
                                                  "in_flight", "scheduled" (retries and delays
                                                  waiting), "holding" (reorder windows),
                                                  "recorded" (events not yet queued),
                                                  "retry_schedule"}``
POST        /_emulator/webhooks/pause             hold every delivery (new ones queue up)
POST        /_emulator/webhooks/resume            send what was held, in order, and carry on
POST        /_emulator/webhooks/wait              body ``{"timeout": s}`` (default 10, at most
                                                  300): answer once nothing is queued, in flight,
                                                  scheduled or held, or at the timeout; answers the
                                                  state (``idle`` says which). While paused, held
                                                  deliveries keep it from being idle
GET         /_emulator/webhooks/deliveries        ``{"deliveries": [attempt, ...]}``, oldest
                                                  first (the last 50,000); query ``event`` and
                                                  ``endpoint`` filter. An attempt: ``event``,
                                                  ``type``, ``endpoint``, ``attempt`` (1, 2...),
                                                  ``duplicate``, ``outcome`` (``succeeded``,
                                                  ``failed``, ``dropped``: never sent, ``skipped``:
                                                  endpoint deleted or disabled), ``status`` (HTTP
                                                  status or null), ``error``, ``fault``,
                                                  ``signature_timestamp``, ``started_at``,
                                                  ``finished_at``, ``next_retry_at`` (wall clock)
DELETE      /_emulator/webhooks/deliveries        clear the delivery log
GET         /_emulator/webhooks/retry_schedule    ``{"delays", "max_attempts",
                                                  "timeout_seconds"}``
POST        /_emulator/webhooks/retry_schedule    body ``{"delays": [s, ...],
                                                  "timeout_seconds": s}`` (either): the waits, in
                                                  wall-clock seconds, before each retry (so
                                                  ``len(delays) + 1`` attempts; ``[]``: no retry)
                                                  and each attempt's timeout (at most 60 s).
                                                  Default: 0.5, 1, 2, 4, 8 and 5 s
GET         /_emulator/webhooks/faults            ``{"faults": [rule, ...]}``
POST        /_emulator/webhooks/faults            body: a delivery fault rule (``kind``:
                                                  ``duplicate``, ``reorder``, ``delay``, ``drop``;
                                                  ``match`` (event type glob), ``endpoint``,
                                                  ``probability``, ``count``, ``seconds`` (delay),
                                                  ``window``, ``order``, ``hold_seconds``
                                                  (reorder)): answers it with its ``id`` (see
                                                  webhook_faults.py)
DELETE      /_emulator/webhooks/faults            remove every delivery fault rule
DELETE      /_emulator/webhooks/faults/{id}       remove one
POST        /_emulator/webhooks/endpoints/{id}/roll_secret
                                                  body ``{"expires_in": s}`` (0 to 86,400,
                                                  default 0): a new secret for the endpoint, the
                                                  old one signing too (a second ``v1``) for
                                                  ``expires_in`` wall-clock seconds; answers
                                                  ``{"endpoint", "secret",
                                                  "previous_secret_expires_at"}`` (404 for an
                                                  unknown endpoint)
==========  ====================================  ============================================

Dunning (see payments.py): a failed invoice is retried every ``retry_interval_seconds`` of
emulator time, at most ``retries`` times; after the last failure its subscription becomes
``final_status`` (Stripe's "subscription status after all retries fail" setting). Defaults: 3
retries, 3 days apart, then ``past_due``. Unknown customers are a 404.

Webhooks (see webhooks.py): deliveries run on the wall clock, not the emulator clock, and so
do the retry schedule and the delivery faults; a webhook's signature timestamp is wall-clock
time even when the emulator clock is days ahead.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from stripe_emulator import admin_webhooks, billing, bulk, cards, fixture_prices, payments
from stripe_emulator.config import API_VERSION
from stripe_emulator.emulator import Emulator
from stripe_emulator.faults import FaultRule

Endpoint = Callable[[Request], Awaitable[JSONResponse]]

_RULE_FIELDS = frozenset(
    {
        "kind",
        "match",
        "probability",
        "count",
        "after_execution",
        "latency_ms",
        "hang_seconds",
        "status",
        "should_retry",
        "retry_after",
        "replays",
    }
)


_BULK_FIELDS = frozenset(
    {
        "count",
        "customer_id",
        "subscription_id",
        "item_id",
        "prices",
        "current_period_start",
        "current_period_end",
        "start",
        "price_overrides",
        "created",
        "rows",
    }
)


class AdminError(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _number(body: dict[str, Any], name: str) -> float:
    value = body.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise AdminError(f"`{name}` must be a number")
    return float(value)


def _integer(body: dict[str, Any], name: str, default: int | None = None) -> int:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise AdminError(f"`{name}` must be an integer")
    return value


def _text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise AdminError(f"`{name}` must be a string")
    return value


def _bulk_subscriptions(body: dict[str, Any]) -> bulk.BulkSubscriptions:
    unknown = set(body) - _BULK_FIELDS
    if unknown:
        raise AdminError(f"unknown bulk fields: {', '.join(sorted(unknown))}")
    rows = body.get("rows")
    if ("count" in body) == (rows is not None):
        raise AdminError("give one of `count` (by pattern) and `rows` (by row)")
    if rows is not None:
        if not isinstance(rows, list):
            raise AdminError("`rows` must be a list of objects")
        if "start" in body or "price_overrides" in body:
            raise AdminError("`start` and `price_overrides` go with `count`, not `rows`")
    prices = body.get("prices", [] if rows is not None else None)
    if not isinstance(prices, list) or not all(isinstance(price, str) for price in prices):
        raise AdminError("`prices` must be a list of price ids")
    overrides = body.get("price_overrides", {})
    if not isinstance(overrides, dict) or not all(
        key.isdigit() and isinstance(price, str) for key, price in overrides.items()
    ):
        raise AdminError("`price_overrides` must map indexes to price ids")

    def period(name: str) -> int | None:
        # By row, a default for the rows that give none.
        return None if rows is not None and body.get(name) is None else _integer(body, name)

    created = body.get("created")
    return bulk.BulkSubscriptions(
        count=None if rows is not None else _integer(body, "count"),
        customer_id=_text(body, "customer_id"),
        subscription_id=_text(body, "subscription_id"),
        item_id=_text(body, "item_id"),
        prices=tuple(prices),
        current_period_start=period("current_period_start"),
        current_period_end=period("current_period_end"),
        start=_integer(body, "start", 0),
        price_overrides=tuple((int(key), price) for key, price in overrides.items()),
        created=None if created is None else _integer(body, "created"),
        rows=rows,
    )


async def _json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    try:
        body = await request.json()
    except ValueError as error:
        raise AdminError(f"invalid JSON body: {error}") from error
    if not isinstance(body, dict):
        raise AdminError("the body must be a JSON object")
    return body


def routes(emulator: Emulator) -> list[Route]:
    """The admin routes bound to ``emulator``."""

    def endpoint(handler: Callable[[Request], Awaitable[Any]]) -> Endpoint:
        async def wrapped(request: Request) -> JSONResponse:
            try:
                return JSONResponse(await handler(request))
            except AdminError as error:
                return JSONResponse({"error": str(error)}, status_code=error.status)

        return wrapped

    def clock_state(**extra: Any) -> dict[str, Any]:
        return {"now": emulator.clock.now(), "offset": emulator.clock.offset, **extra}

    def roll_over() -> dict[str, Any]:
        rolled = billing.roll_subscriptions(emulator.store, emulator.clock.now())
        emulator.tick()  # also expires idempotency keys older than 24 h of emulator time
        return clock_state(rolled=rolled)

    async def health(request: Request) -> dict[str, Any]:
        return {"status": "ok", "now": emulator.clock.now(), "api_version": API_VERSION}

    async def reset(request: Request) -> dict[str, Any]:
        emulator.reset()
        return {"reset": True, **clock_state()}

    async def get_clock(request: Request) -> dict[str, Any]:
        return clock_state()

    async def advance_clock(request: Request) -> dict[str, Any]:
        seconds = _number(await _json_body(request), "seconds")
        try:
            emulator.clock.advance(seconds)
        except ValueError as error:
            raise AdminError(str(error)) from error
        return roll_over()

    async def set_clock(request: Request) -> dict[str, Any]:
        timestamp = _number(await _json_body(request), "time")
        try:
            emulator.clock.set(timestamp)
        except ValueError as error:
            raise AdminError(str(error)) from error
        return roll_over()

    async def reset_clock(request: Request) -> dict[str, Any]:
        emulator.clock.reset()
        return clock_state()

    async def list_faults(request: Request) -> dict[str, Any]:
        return {"faults": [rule.to_json() for rule in emulator.faults.rules]}

    async def add_fault(request: Request) -> dict[str, Any]:
        body = await _json_body(request)
        unknown = set(body) - _RULE_FIELDS
        if unknown:
            raise AdminError(f"unknown fault fields: {', '.join(sorted(unknown))}")
        if "kind" not in body:
            raise AdminError("`kind` is required")
        try:
            rule: FaultRule = emulator.faults.add(**body)
        except (TypeError, ValueError) as error:
            raise AdminError(str(error)) from error
        return rule.to_json()

    async def clear_faults(request: Request) -> dict[str, Any]:
        emulator.faults.clear()
        return {"faults": []}

    async def remove_fault(request: Request) -> dict[str, Any]:
        rule_id = request.path_params["rule_id"]
        if not emulator.faults.remove(rule_id):
            raise AdminError(f"no fault {rule_id}", 404)
        return {"removed": rule_id}

    async def seed_faults(request: Request) -> dict[str, Any]:
        seed = (await _json_body(request)).get("seed")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise AdminError("`seed` must be an integer")
        emulator.faults.seed(seed)
        emulator.webhooks.faults.seed(seed)
        return {"seed": seed}

    async def get_rate_limit(request: Request) -> dict[str, Any]:
        return {"per_second": emulator.limiter.per_second}

    async def set_rate_limit(request: Request) -> dict[str, Any]:
        per_second = _number(await _json_body(request), "per_second")
        try:
            emulator.limiter.set(per_second)
        except ValueError as error:
            raise AdminError(str(error)) from error
        return {"per_second": emulator.limiter.per_second}

    async def list_requests(request: Request) -> dict[str, Any]:
        return {
            "requests": emulator.log.select(
                request.query_params.get("path_prefix"), request.query_params.get("method")
            )
        }

    async def clear_requests(request: Request) -> dict[str, Any]:
        emulator.log.clear()
        return {"requests": []}

    async def save_state(request: Request) -> dict[str, Any]:
        try:
            path = emulator.save()
        except ValueError as error:
            raise AdminError(str(error)) from error
        return {"saved": str(path)}

    async def bulk_subscriptions(request: Request) -> dict[str, Any]:
        spec = _bulk_subscriptions(await _json_body(request))
        started = time.perf_counter()
        try:
            made = bulk.seed_subscriptions(emulator.store, emulator.tick(), spec)
        except bulk.BulkError as error:
            raise AdminError(str(error)) from error
        return {**made, "seconds": round(time.perf_counter() - started, 3)}

    async def bulk_prices(request: Request) -> dict[str, Any]:
        body = await _json_body(request)
        unknown = set(body) - {"prices"}
        if unknown or not isinstance(body.get("prices"), list):
            raise AdminError('the body is {"prices": [price, ...]}')
        try:
            made = fixture_prices.seed_prices(emulator.store, emulator.tick(), body["prices"])
        except fixture_prices.FixtureError as error:
            raise AdminError(str(error)) from error
        return {"prices": made}

    async def customer_in(request: Request) -> str:
        customer_id = (await _json_body(request)).get("customer")
        if not isinstance(customer_id, str) or not customer_id:
            raise AdminError("`customer` must be a customer id")
        if customer_id not in emulator.store.customers:
            raise AdminError(f"no customer {customer_id}", 404)
        return customer_id

    async def list_payments(request: Request) -> dict[str, Any]:
        return {
            "failing": sorted(emulator.store.failing_customers),
            "authenticating": sorted(emulator.store.authenticating_customers),
        }

    async def require_authentication(request: Request) -> dict[str, Any]:
        customer_id = await customer_in(request)
        emulator.tick()
        cards.require_authentication(emulator.store, customer_id)
        return {"customer": customer_id, "authenticating": True}

    async def fail_payments(request: Request) -> dict[str, Any]:
        customer_id = await customer_in(request)
        emulator.tick()
        payments.fail_payments(emulator.store, customer_id)
        return {"customer": customer_id, "failing": True}

    async def succeed_payments(request: Request) -> dict[str, Any]:
        customer_id = await customer_in(request)
        now = emulator.tick()
        events = emulator.store.events
        events.begin(now)  # what paying changes is recorded (with no request)
        try:
            paid = payments.succeed_payments(emulator.store, customer_id, now)
        finally:
            events.end()
        return {"customer": customer_id, "failing": False, "paid": paid}

    async def get_dunning(request: Request) -> dict[str, Any]:
        return dict(emulator.store.dunning)

    async def set_dunning(request: Request) -> dict[str, Any]:
        body = await _json_body(request)
        unknown = set(body) - set(emulator.store.dunning)
        if unknown:
            raise AdminError(f"unknown dunning fields: {', '.join(sorted(unknown))}")
        rules = dict(emulator.store.dunning)
        if "retries" in body:
            retries = body["retries"]
            if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
                raise AdminError("`retries` must be an integer >= 0")
            rules["retries"] = retries
        if "retry_interval_seconds" in body:
            interval = _number(body, "retry_interval_seconds")
            if interval <= 0:
                raise AdminError("`retry_interval_seconds` must be > 0")
            rules["retry_interval_seconds"] = int(interval)
        if "final_status" in body:
            if body["final_status"] not in payments.FINAL_STATUSES:
                raise AdminError(
                    f"`final_status` must be one of {', '.join(payments.FINAL_STATUSES)}"
                )
            rules["final_status"] = body["final_status"]
        emulator.store.dunning = rules
        return dict(rules)

    table: list[tuple[str, str, Callable[[Request], Awaitable[Any]]]] = [
        ("GET", "/health", health),
        ("POST", "/reset", reset),
        ("GET", "/clock", get_clock),
        ("POST", "/clock/advance", advance_clock),
        ("POST", "/clock/set", set_clock),
        ("POST", "/clock/reset", reset_clock),
        ("GET", "/faults", list_faults),
        ("POST", "/faults", add_fault),
        ("DELETE", "/faults", clear_faults),
        ("POST", "/faults/seed", seed_faults),
        ("DELETE", "/faults/{rule_id}", remove_fault),
        ("GET", "/rate_limit", get_rate_limit),
        ("POST", "/rate_limit", set_rate_limit),
        ("GET", "/requests", list_requests),
        ("DELETE", "/requests", clear_requests),
        ("POST", "/state/save", save_state),
        ("POST", "/bulk/subscriptions", bulk_subscriptions),
        ("POST", "/bulk/prices", bulk_prices),
        ("GET", "/payments", list_payments),
        ("POST", "/payments/fail", fail_payments),
        ("POST", "/payments/succeed", succeed_payments),
        ("POST", "/payments/require_authentication", require_authentication),
        ("GET", "/dunning", get_dunning),
        ("POST", "/dunning", set_dunning),
        *admin_webhooks.table(emulator, _json_body, AdminError),
    ]
    return [
        Route("/_emulator" + path, endpoint(handler), methods=[method])
        for method, path, handler in table
    ]
