"""A typed client for the emulator's admin API (routes documented in ``admin.py``).

>>> admin = EmulatorAdmin("http://127.0.0.1:12111")
>>> admin.reset()
>>> admin.advance_clock("31d")  # or seconds
>>> [r.status for r in admin.requests(path_prefix="/v1/customers", method="POST")]
>>> admin.fail_payments("cus_...")  # later charges of that customer are declined
>>> admin.set_dunning(retries=2, retry_interval_seconds=86_400, final_status="canceled")
>>> admin.wait_for_deliveries()  # webhooks: see client_webhooks.py
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import httpx

from stripe_emulator.client_webhooks import WebhookAdmin

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_duration(text: str | float) -> float:
    """Seconds in ``"31d"``, ``"1d12h"``, ``"90m"``, ``"45s"``, ``"2w"`` or a plain number."""
    if isinstance(text, (int, float)):
        return float(text)
    cleaned = text.strip().lower()
    try:
        return float(cleaned)
    except ValueError:
        pass
    total = 0.0
    position = 0
    for match in _DURATION.finditer(cleaned):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if position != len(cleaned) or not cleaned:
        raise ValueError(f"not a duration: {text!r} (examples: 31d, 1d12h, 90m, 3600)")
    return total


class EmulatorAdminError(RuntimeError):
    """The admin API refused a request (its message says why)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    """One request the emulator received on its Stripe API.

    ``query`` and ``form`` are the parsed parameters (bracket notation already nested);
    ``status`` is ``None`` when the connection was dropped; ``fault`` names what was injected
    (``"api_error"``, ``"drop(after)"``, ``"latency+api_error"``, ``"rate_limiter"``...).
    """

    request_id: str
    method: str
    path: str
    query: dict[str, Any]
    form: dict[str, Any]
    idempotency_key: str | None
    stripe_version: str | None
    status: int | None
    error_type: str | None
    error_code: str | None
    fault: str | None
    replayed: bool
    dropped: bool
    wall_time: float
    emulator_time: int
    duration_ms: float

    @property
    def params(self) -> dict[str, Any]:
        """Query and form parameters together (form wins, as for the endpoint)."""
        return {**self.query, **self.form}


@dataclass(frozen=True, slots=True)
class Fault:
    """A fault rule as the emulator holds it (``fired`` counts its applications so far)."""

    id: str
    kind: str
    match: str
    probability: float
    count: int | None
    after_execution: bool
    latency_ms: int
    hang_seconds: float
    status: int | None
    should_retry: bool | None
    retry_after: int | None
    replays: bool = field(default=False)
    fired: int = field(default=0)


@dataclass(frozen=True, slots=True)
class Dunning:
    """How failed invoices are retried: every ``retry_interval_seconds`` of emulator time, at
    most ``retries`` times; then the subscription becomes ``final_status`` (``past_due``,
    ``unpaid`` or ``canceled``)."""

    retries: int
    retry_interval_seconds: int
    final_status: str


class EmulatorAdmin(WebhookAdmin):
    """Admin API client. Pass ``client`` to reuse an ``httpx.Client`` (not closed here).

    Webhook deliveries (pause, faults, retry schedule, attempts, waiting): the methods of
    :class:`stripe_emulator.client_webhooks.WebhookAdmin`.
    """

    def __init__(
        self, base_url: str, *, timeout: float = 10.0, client: httpx.Client | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._owned = client is None
        self._client = client or httpx.Client(base_url=self.base_url, timeout=timeout)

    def close(self) -> None:
        if self._owned:
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        response = self._client.request(
            method,
            self.base_url + "/_emulator" + path,
            json=body,
            params=params,
            timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
        )
        try:
            payload: dict[str, Any] = response.json()
        except ValueError:
            payload = {"error": response.text}
        if response.status_code >= 400:
            raise EmulatorAdminError(response.status_code, str(payload.get("error", payload)))
        return payload

    # Lifecycle ---------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/health")

    def wait_until_ready(self, timeout: float = 10.0) -> None:
        """Poll ``/health`` until the emulator answers (raises TimeoutError otherwise)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.health()
                return
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no emulator at {self.base_url}") from None
                time.sleep(0.05)

    def reset(self) -> None:
        """Forget data, idempotency keys, faults, the request log and the clock offset."""
        self._call("POST", "/reset")

    def save_state(self) -> str:
        """Write the state file now; returns its path."""
        return str(self._call("POST", "/state/save")["saved"])

    def bulk_prices(self, prices: Sequence[Mapping[str, Any]]) -> list[str]:
        """A benchmark fixture: recurring prices with the ids given (``{"id", "product",
        "unit_amount", "currency", "interval"}``), which Stripe's API never lets a caller
        choose, and their products if missing (``stripe_emulator/fixture_prices.py``)."""
        made = self._call("POST", "/bulk/prices", {"prices": [dict(price) for price in prices]})
        return [str(price_id) for price_id in made["prices"]]

    def bulk_subscriptions(
        self,
        count: int | None = None,
        *,
        customer_id: str,
        subscription_id: str,
        item_id: str,
        prices: Sequence[str] = (),
        current_period_start: int | None = None,
        current_period_end: int | None = None,
        start: int = 0,
        price_overrides: Mapping[int, str] | None = None,
        created: int | None = None,
        rows: Sequence[Mapping[str, Any]] | None = None,
        timeout: float = 600.0,
    ) -> dict[str, Any]:
        """A benchmark fixture: customer ``i`` with one subscription ``i`` (one item, quantity
        1), made directly in the store with no events, webhooks, invoices or request-log
        entries (``stripe_emulator/bulk.py``). Ids are patterns of ``i``
        (``customer_id="cus_scale{i:09d}"``). Give ``count`` or ``rows``:

        * ``count``: ``i`` from ``start`` to ``start + count - 1``, all ``active``, subscription
          ``i`` on ``price_overrides[i]``, else ``prices[i % len(prices)]``, all in the current
          period given (which must end after the emulator's now);
        * ``rows``: one subscription per row, ``{"i": int, "price": str, "status": "active" |
          "past_due" | "canceled", "current_period_start": int, "current_period_end": int,
          "created": int}``, all but ``i`` optional (``prices[i % len(prices)]``, ``active``,
          the period and ``created`` given here); only a canceled row's period may be over.

        A refused request (``EmulatorAdminError``) makes nothing. Returns ``{"customers",
        "subscriptions", "first", "last", "seconds"}``.
        """
        body: dict[str, Any] = {
            "customer_id": customer_id,
            "subscription_id": subscription_id,
            "item_id": item_id,
            "prices": list(prices),
        }
        optional = {
            "count": count,
            "current_period_start": current_period_start,
            "current_period_end": current_period_end,
            "start": start or None,
            "price_overrides": (
                {str(index): price for index, price in price_overrides.items()}
                if price_overrides
                else None
            ),
            "created": created,
            "rows": None if rows is None else list(rows),
        }
        body.update((name, value) for name, value in optional.items() if value is not None)
        return self._call("POST", "/bulk/subscriptions", body, timeout=timeout)

    # Clock --------------------------------------------------------------------------------------

    def now(self) -> int:
        """Emulator time (Unix seconds)."""
        return int(self._call("GET", "/clock")["now"])

    def advance_clock(self, seconds: float | str) -> int:
        """Move emulator time forward (``3600`` or ``"31d"``); returns the new time."""
        return int(
            self._call("POST", "/clock/advance", {"seconds": parse_duration(seconds)})["now"]
        )

    def set_time(self, timestamp: int) -> int:
        """Jump emulator time forward to ``timestamp``; returns the new time."""
        return int(self._call("POST", "/clock/set", {"time": timestamp})["now"])

    def clock(self) -> dict[str, float]:
        """``{"now": emulator unix time, "offset": seconds ahead of the wall clock}``."""
        found = self._call("GET", "/clock")
        return {"now": float(found["now"]), "offset": float(found["offset"])}

    def reset_clock(self) -> int:
        """Back to the wall clock, data kept; returns the new time."""
        return int(self._call("POST", "/clock/reset")["now"])

    # Faults and limits ---------------------------------------------------------------------------

    def add_fault(
        self,
        kind: str,
        match: str = "*",
        *,
        probability: float = 1.0,
        count: int | None = None,
        after_execution: bool = False,
        latency_ms: int = 0,
        hang_seconds: float | None = None,
        status: int | None = None,
        should_retry: bool | None = None,
        retry_after: int | None = None,
        replays: bool = False,
    ) -> Fault:
        """Add a fault rule (kinds and semantics: ``stripe_emulator/faults.py``)."""
        body: dict[str, Any] = {
            "kind": kind,
            "match": match,
            "probability": probability,
            "count": count,
            "after_execution": after_execution,
            "latency_ms": latency_ms,
            "status": status,
            "should_retry": should_retry,
            "retry_after": retry_after,
            "replays": replays,
        }
        if hang_seconds is not None:
            body["hang_seconds"] = hang_seconds
        return Fault(**self._call("POST", "/faults", body))

    def faults(self) -> list[Fault]:
        return [Fault(**rule) for rule in self._call("GET", "/faults")["faults"]]

    def remove_fault(self, fault_id: str) -> None:
        self._call("DELETE", f"/faults/{fault_id}")

    def clear_faults(self) -> None:
        self._call("DELETE", "/faults")

    def seed_faults(self, seed: int) -> None:
        """Reseed the RNG behind probabilistic faults (reset reseeds with 0)."""
        self._call("POST", "/faults/seed", {"seed": seed})

    def set_rate_limit(self, per_second: float) -> None:
        """Requests per second before 429 ``rate_limit`` (0 turns the limiter off)."""
        self._call("POST", "/rate_limit", {"per_second": per_second})

    def rate_limit(self) -> float:
        return float(self._call("GET", "/rate_limit")["per_second"])

    # Payments ------------------------------------------------------------------------------------

    def fail_payments(self, customer_id: str) -> None:
        """Every later payment attempt of the customer fails (``card_declined``), including
        retries of its open invoices."""
        self._call("POST", "/payments/fail", {"customer": customer_id})

    def succeed_payments(self, customer_id: str) -> list[str]:
        """Payments of the customer succeed again; its open ``charge_automatically`` invoices
        are paid now. Returns the ids of the invoices paid."""
        answer = self._call("POST", "/payments/succeed", {"customer": customer_id})
        return [str(invoice_id) for invoice_id in answer["paid"]]

    def failing_customers(self) -> list[str]:
        return [str(customer) for customer in self._call("GET", "/payments")["failing"]]

    def require_authentication(self, customer_id: str) -> None:
        """Every later payment attempt of the customer needs its authentication (3D Secure)
        on the invoice's hosted page."""
        self._call("POST", "/payments/require_authentication", {"customer": customer_id})

    def authenticate_invoice(self, invoice_id: str, *, succeed: bool = True) -> str:
        """The customer authenticates the payment of an open invoice on its hosted page (it
        is paid), or fails to. Returns the invoice's status."""
        answer = self._call(
            "POST", f"/hosted_invoices/{invoice_id}/authenticate", {"succeed": succeed}
        )
        return str(answer["status"])

    def set_dunning(
        self,
        *,
        retries: int | None = None,
        retry_interval_seconds: float | str | None = None,
        final_status: str | None = None,
    ) -> Dunning:
        """Change the retry rules (``retry_interval_seconds`` also takes ``"3d"``); the others
        keep their value. Returns the rules now in force."""
        body: dict[str, Any] = {}
        if retries is not None:
            body["retries"] = retries
        if retry_interval_seconds is not None:
            body["retry_interval_seconds"] = parse_duration(retry_interval_seconds)
        if final_status is not None:
            body["final_status"] = final_status
        return Dunning(**self._call("POST", "/dunning", body))

    def dunning(self) -> Dunning:
        return Dunning(**self._call("GET", "/dunning"))

    # Request log --------------------------------------------------------------------------------

    def requests(
        self, path_prefix: str | None = None, method: str | None = None
    ) -> list[LoggedRequest]:
        """Logged Stripe API requests, oldest first, optionally filtered."""
        params = {}
        if path_prefix is not None:
            params["path_prefix"] = path_prefix
        if method is not None:
            params["method"] = method
        entries = self._call("GET", "/requests", params=params)["requests"]
        return [LoggedRequest(**entry) for entry in entries]

    def clear_requests(self) -> None:
        self._call("DELETE", "/requests")
