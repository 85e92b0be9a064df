"""How the fake provider answers a request, as Stripe does: one answer per idempotency key
(a repeated key replays the first answer, a refusal included; the same key with other
parameters or for another operation is an ``Internal`` error, Stripe's
``IdempotencyError``), keys forgotten after 24 hours on the fake clock, every request
recorded, and failures scripted per operation: before the call runs (nothing is remembered
under the key) or after it took effect (the answer is lost on the way, and a retry with the
key gets it replayed).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from domain.errors import (
    CommandError,
    GoneAtProvider,
    Internal,
    InvalidArgument,
    error_info,
    field_violations,
)
from tests.support.fakes.clock import FakeClock

STRIPE_KEY_MEMORY = timedelta(hours=24)


@dataclass(frozen=True)
class ProviderCall:
    """One request the fake provider received (a replay or a failure included)."""

    operation: str
    idempotency_key: str | None
    arguments: tuple[Any, ...]
    outcome: str
    """``executed``, ``replayed`` (the key's first answer, again) or ``failed``."""


@dataclass
class _ScriptedFailure:
    error: Exception
    after_execution: bool


@dataclass
class _Remembered:
    request: tuple[Any, ...]
    result: Any
    at: datetime


class RecordedRequests:
    """The requests of a fake provider: what each operation answers is run through
    :meth:`_call`."""

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock
        self.calls: list[ProviderCall] = []
        self._keys: dict[str, _Remembered] = {}
        self._failures: dict[str, list[_ScriptedFailure]] = defaultdict(list)

    def fail_next(
        self, operation: str, error: Exception, *, times: int = 1, after_execution: bool = False
    ) -> None:
        """The next ``times`` calls of ``operation`` (a method name) raise ``error``; with
        ``after_execution`` the call takes effect first (the answer is lost on the way)."""
        self._failures[operation].extend([_ScriptedFailure(error, after_execution)] * times)

    def calls_of(self, operation: str, outcome: str | None = None) -> list[ProviderCall]:
        return [
            call
            for call in self.calls
            if call.operation == operation and outcome in (None, call.outcome)
        ]

    def _call(
        self,
        operation: str,
        key: str | None,
        arguments: tuple[Any, ...],
        execute: Callable[[], Any],
    ) -> Any:
        failure = self._failures[operation].pop(0) if self._failures[operation] else None
        if failure is not None and not failure.after_execution:
            self.calls.append(ProviderCall(operation, key, arguments, "failed"))
            raise failure.error
        now = self._clock.now()
        remembered = self._keys.get(key) if key is not None else None
        if remembered is not None and now - remembered.at >= STRIPE_KEY_MEMORY:
            remembered = None  # Stripe keeps a key for 24 hours
        if remembered is not None:
            if remembered.request != (operation, *arguments):
                self.calls.append(ProviderCall(operation, key, arguments, "failed"))
                raise Internal(
                    "the billing provider saw one idempotency key with two different requests",
                    details=[error_info("PROVIDER_IDEMPOTENCY", operation=operation)],
                )
            self.calls.append(ProviderCall(operation, key, arguments, "replayed"))
            result = remembered.result
        else:
            try:
                result = execute()
            except CommandError as refusal:
                # Stripe remembers a 4xx under its key too, and answers it again.
                if key is not None:
                    self._keys[key] = _Remembered((operation, *arguments), refusal, now)
                self.calls.append(ProviderCall(operation, key, arguments, "failed"))
                raise
            if key is not None:
                self._keys[key] = _Remembered((operation, *arguments), result, now)
            self.calls.append(ProviderCall(operation, key, arguments, "executed"))
        if isinstance(result, InvalidArgument):
            raise result
        if failure is not None:  # it took effect; the answer was lost
            raise failure.error
        return result


def rejected(field_name: str, message: str) -> InvalidArgument:
    """A 4xx as ``adapters.provider.stripe_errors.translate`` makes it."""
    return InvalidArgument(
        f"the billing provider rejected the request: {message}",
        details=[
            field_violations([(field_name, message)]),
            error_info("PROVIDER_REJECTED", status="400"),
        ],
    )


def gone(field_name: str, message: str) -> GoneAtProvider:
    """Stripe's 404 ``resource_missing`` on the request's own object, as
    ``adapters.provider.stripe_errors.translate`` makes it (a missing object a parameter names
    is :func:`rejected`)."""
    return GoneAtProvider(
        f"the billing provider rejected the request: {message}",
        details=[
            field_violations([(field_name, message)]),
            error_info("PROVIDER_REJECTED", status="404"),
        ],
    )
