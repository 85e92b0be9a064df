"""Fault injection rules and the rate limiter.

A rule matches requests by method and path glob (``"POST /v1/customers"``,
``"* /v1/customers/*"``, ``"/v1/prices*"`` for any method, or ``"*"``) and fires with
``probability`` (drawn from a seedable RNG, so runs are reproducible) until it has fired
``count`` times (``None`` = forever). Kinds:

=======================  ===================================================================
``rate_limit``           429 ``rate_limit`` (the SDK raises RateLimitError, does not retry)
``lock_timeout``         429 ``lock_timeout`` + ``Stripe-Should-Retry: true`` (SDK retries)
``api_error``            500 ``api_error``
``service_unavailable``  503 ``api_error``
``card_declined``        402 ``card_error`` / ``card_declined`` (shape for card failures)
``latency``              wait ``latency_ms`` then carry on (latency rules add up)
``drop``                 close the connection without answering (SDK: APIConnectionError)
``hang``                 answer nothing for ``hang_seconds`` (at most 60), then close; a reset
                         releases hung requests at once
=======================  ===================================================================

``status`` overrides an error kind's HTTP status (e.g. 409 for a lock timeout), and
``should_retry``/``retry_after`` set the ``Stripe-Should-Retry``/``Retry-After`` headers. By
default the headers are what Stripe sends: ``Stripe-Should-Retry: true`` on lock timeouts,
``false`` on a 500 stored under an idempotency key, none otherwise; Stripe never sends
``Retry-After`` (stripe/stripe-python#1843 removed the SDK's support for it), so
``retry_after`` only exists to exercise a client's own handling of it.
By default a fault acts *before* the endpoint executes (nothing is written, nothing is stored
under the idempotency key). With ``after_execution`` (kinds ``api_error``,
``service_unavailable``, ``latency``, ``drop``, ``hang``) the write happens first: a 500/503 is
then stored under the idempotency key like any executed response, while a dropped or hung
request leaves the successful response stored, so the client's retry is an idempotent replay.
Idempotent replays are answered before faults are considered, except by a rule with
``replays`` (kinds ``drop``, ``api_error``, ``service_unavailable``): a fault of the network or
of Stripe's edge, which loses or refuses a replay's answer as readily as a first answer's
(logged as ``drop(replay)``…; nothing executes either way).
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Final

from stripe_emulator import errors
from stripe_emulator.errors import StripeError

ERROR_KINDS: Final = (
    "rate_limit",
    "lock_timeout",
    "api_error",
    "service_unavailable",
    "card_declined",
)
KINDS: Final = (*ERROR_KINDS, "latency", "drop", "hang")
AFTER_EXECUTION_KINDS: Final = frozenset(
    {"api_error", "service_unavailable", "latency", "drop", "hang"}
)
REPLAY_KINDS: Final = frozenset({"drop", "api_error", "service_unavailable"})
MAX_HANG_SECONDS: Final = 60.0


@dataclass(slots=True)
class FaultRule:
    """One injection rule (see the module docstring for the fields' meaning)."""

    id: str
    kind: str
    match: str = "*"
    probability: float = 1.0
    count: int | None = None
    after_execution: bool = False
    latency_ms: int = 0
    hang_seconds: float = MAX_HANG_SECONDS
    status: int | None = None
    should_retry: bool | None = None
    retry_after: int | None = None
    replays: bool = False
    fired: int = 0
    _method: str = field(default="*", repr=False)
    _path: re.Pattern[str] = field(default=re.compile(".*"), repr=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; one of {', '.join(KINDS)}")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError("probability must be between 0 and 1")
        if self.count is not None and self.count < 0:
            raise ValueError("count must be >= 0")
        if self.after_execution and self.kind not in AFTER_EXECUTION_KINDS:
            raise ValueError(f"a {self.kind} fault cannot act after execution")
        if self.replays and self.kind not in REPLAY_KINDS:
            raise ValueError(f"a {self.kind} fault cannot act on replays")
        if self.kind == "latency" and self.latency_ms <= 0:
            raise ValueError("a latency fault needs latency_ms > 0")
        if not 0 < self.hang_seconds <= MAX_HANG_SECONDS:
            raise ValueError(f"hang_seconds must be in (0, {MAX_HANG_SECONDS:g}]")
        if self.status is not None and not 400 <= self.status <= 599:
            raise ValueError("status must be an HTTP error status (400-599)")
        method, _, path = self.match.strip().partition(" ")
        if not path:
            method, path = ("*", method) if method.startswith("/") else (method, "*")
        self._method = method.upper()
        self._path = re.compile(fnmatch.translate(path.strip()))

    def matches(self, method: str, path: str) -> bool:
        return (self._method in ("*", method)) and self._path.match(path) is not None

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.fired >= self.count

    def error(self) -> StripeError:
        """The Stripe error this rule answers with (error kinds only)."""
        builders = {
            "rate_limit": errors.rate_limited,
            "lock_timeout": errors.lock_timeout,
            "api_error": lambda: errors.api_error(500),
            "service_unavailable": lambda: errors.api_error(503),
            "card_declined": errors.card_declined,
        }
        error = builders[self.kind]()
        if self.status is not None:
            error.status = self.status
        if self.should_retry is not None:
            error.headers["Stripe-Should-Retry"] = "true" if self.should_retry else "false"
        if self.retry_after is not None:
            error.headers["Retry-After"] = str(self.retry_after)
        return error

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "match": self.match,
            "probability": self.probability,
            "count": self.count,
            "after_execution": self.after_execution,
            "latency_ms": self.latency_ms,
            "hang_seconds": self.hang_seconds,
            "status": self.status,
            "should_retry": self.should_retry,
            "retry_after": self.retry_after,
            "replays": self.replays,
            "fired": self.fired,
        }


@dataclass(slots=True)
class Plan:
    """The faults chosen for one request."""

    latency_before_ms: int = 0
    latency_after_ms: int = 0
    rule: FaultRule | None = None

    @property
    def names(self) -> str | None:
        parts = []
        if self.latency_before_ms or self.latency_after_ms:
            parts.append("latency")
        if self.rule is not None:
            parts.append(self.rule.kind + ("(after)" if self.rule.after_execution else ""))
        return "+".join(parts) or None


class FaultEngine:
    def __init__(self) -> None:
        self.rules: list[FaultRule] = []
        # Reproducible fault sequences for tests, not security: a seeded PRNG is the point.
        self.rng = random.Random(0)  # noqa: S311
        self._next_id = 1
        self._release = asyncio.Event()

    def add(self, **fields: Any) -> FaultRule:
        rule = FaultRule(id=f"flt_{self._next_id}", **fields)
        self._next_id += 1
        self.rules.append(rule)
        return rule

    def remove(self, rule_id: str) -> bool:
        before = len(self.rules)
        self.rules = [rule for rule in self.rules if rule.id != rule_id]
        return len(self.rules) != before

    def clear(self) -> None:
        self.rules.clear()
        self.release_hangs()

    def seed(self, value: int) -> None:
        self.rng.seed(value)

    def plan(self, method: str, path: str) -> Plan | None:
        """Decide which faults hit this request (``None`` when no rule fires)."""
        if not self.rules:
            return None
        plan = Plan()
        fired = False
        for rule in self.rules:
            if rule.exhausted or not rule.matches(method, path):
                continue
            if rule.probability < 1.0 and self.rng.random() >= rule.probability:
                continue
            if rule.kind == "latency":
                if rule.after_execution:
                    plan.latency_after_ms += rule.latency_ms
                else:
                    plan.latency_before_ms += rule.latency_ms
            elif plan.rule is None:
                plan.rule = rule
            else:
                continue  # the first firing non-latency rule wins; later ones stay unused
            rule.fired += 1
            fired = True
        return plan if fired else None

    def plan_replay(self, method: str, path: str) -> FaultRule | None:
        """The rule that hits an idempotent replay, if any (rules with ``replays`` only)."""
        for rule in self.rules:
            if not rule.replays or rule.exhausted or not rule.matches(method, path):
                continue
            if rule.probability < 1.0 and self.rng.random() >= rule.probability:
                continue
            rule.fired += 1
            return rule
        return None

    async def hang(self, seconds: float) -> None:
        """Hold a request until ``seconds`` pass or the hangs are released (reset)."""
        release = self._release
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(release.wait(), timeout=min(seconds, MAX_HANG_SECONDS))

    def release_hangs(self) -> None:
        self._release.set()
        self._release = asyncio.Event()


class _TokenBucket:
    """``per_second`` sustained, bursts up to one second's worth."""

    def __init__(self, per_second: float) -> None:
        self.per_second = per_second
        self._capacity = max(1.0, per_second)
        self._tokens = self._capacity
        self._last = time.monotonic()

    def allow(self) -> bool:
        if self.per_second <= 0:
            return True
        now = time.monotonic()
        self._tokens = min(self._capacity, self._tokens + (now - self._last) * self.per_second)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class RateLimiter:
    """Stripe's basic rate limiter: ``per_second`` read operations *and* ``per_second``
    write operations (a ``GET`` reads; every other method writes), each a token bucket."""

    def __init__(self, per_second: float) -> None:
        self.per_second = 0.0
        self._buckets: dict[bool, _TokenBucket] = {}
        self.set(per_second)

    def set(self, per_second: float) -> None:
        if per_second < 0:
            raise ValueError("rate limit must be >= 0 (0 turns it off)")
        self.per_second = per_second
        self._buckets = {True: _TokenBucket(per_second), False: _TokenBucket(per_second)}

    def allow(self, method: str = "GET") -> bool:
        return self._buckets[method.upper() == "GET"].allow()
