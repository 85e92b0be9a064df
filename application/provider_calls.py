"""Every provider call a command makes, recorded around the call (``domain/provider/calls.py``).

:func:`recorded` wraps the :class:`~domain.ports.provider.BillingProvider` the handlers are
given: it passes each call on, then records what was asked (the operation, its subject, its
idempotency key), for which command (the one the runner bound, ``application.log_context``), and
how it ended. Handlers do not change: a registration retried four times and replayed once
shows five calls under one key.

The port is not written out again here: :data:`RECORDINGS` has one row per port method (what
its calls are about, which argument carries the idempotency key), and one forwarder serves
them all. A port method without a row fails at import (and ``tests/unit/test_provider_calls.py``
says which), so a new provider operation costs the port, the adapter, the fake and one row.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar, cast

from application import log_context
from domain.errors import CommandError, TransientError
from domain.ports.application import Clock
from domain.ports.provider import BillingProvider
from domain.provider.calls import CallOutcome, ProviderCall, ProviderCallLog
from domain.provider.rate_budget import RateLimited
from domain.redaction import mask_text

logger = logging.getLogger(__name__)
T = TypeVar("T")

Arguments = Mapping[str, Any]
"""A port call's arguments by parameter name, defaults filled in."""


@dataclass(frozen=True)
class Recording:
    """How the calls of one port method are recorded (the operation is the method's name)."""

    subject: Callable[[Arguments], str | None]
    """What a call is about, ``type:id``, from its arguments (``None``: nothing in particular)."""
    key: str | None = None
    """The argument carrying the call's idempotency key: a write's; ``None`` for a read."""
    pages: bool = False
    """The method answers an iterator of pages, each read when it is advanced: each page is
    recorded as one call."""


def about(kind: str, argument: str) -> Callable[[Arguments], str | None]:
    """The subject ``kind:<argument>`` (none when the argument is ``None``)."""

    def subject(arguments: Arguments) -> str | None:
        value = arguments[argument]
        return None if value is None else f"{kind}:{value}"

    return subject


def _created_subscription(arguments: Arguments) -> str:
    """The subscription our metadata names, else the customer it is made for."""
    subscription_id = arguments["metadata"].get("subscription_id")
    if subscription_id:
        return f"subscription:{subscription_id}"
    return f"provider_customer:{arguments['customer_id']}"


WRITE_KEY = "idempotency_key"

RECORDINGS: Mapping[str, Recording | None] = {
    "create_customer": Recording(
        lambda arguments: f"billing_account:{arguments['customer'].billing_account_id}",
        WRITE_KEY,
    ),
    "find_customer": Recording(about("billing_account", "billing_account_id")),
    "get_customer": Recording(about("provider_customer", "customer_id")),
    # Set up by an operator (the CLI, the local seed), never by a command: no story to tell.
    "register_webhook_endpoint": None,
    "create_plan_price": Recording(
        lambda arguments: f"plan:{arguments['plan'].plan_id}", WRITE_KEY
    ),
    "create_subscription": Recording(_created_subscription, WRITE_KEY),
    "get_subscription": Recording(about("provider_subscription", "provider_id")),
    "change_subscription_price": Recording(
        about("provider_subscription", "provider_id"), WRITE_KEY
    ),
    "preview_change": Recording(about("provider_subscription", "provider_id")),
    "list_customers": Recording(lambda arguments: None),
    "list_subscriptions": Recording(about("provider_customer", "customer_id")),
    "customer_pages": Recording(lambda arguments: None, pages=True),
    "subscription_pages": Recording(lambda arguments: None, pages=True),
    "find_subscription": Recording(about("subscription", "subscription_id")),
    "list_invoices": Recording(about("provider_subscription", "provider_subscription_id")),
    "upcoming_invoice": Recording(about("provider_subscription", "provider_subscription_id")),
    "list_billed_invoices": Recording(about("provider_subscription", "provider_subscription_id")),
}
"""Each method of :class:`~domain.ports.provider.BillingProvider` → how its calls are
recorded; ``None``: passed on unrecorded."""


def port_methods() -> set[str]:
    """The methods of the provider port (its ``name`` is a property, not a call)."""
    return {
        name
        for name, member in vars(BillingProvider).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def check_recordings(recordings: Mapping[str, Recording | None]) -> None:
    """Refuse a table that misses a port method, names one the port lacks, or names as the
    idempotency key an argument the method does not take."""
    methods = port_methods()
    if missing := sorted(methods - set(recordings)):
        raise TypeError(f"provider port methods without a recording rule: {missing}")
    if unknown := sorted(set(recordings) - methods):
        raise TypeError(f"recording rules for no provider port method: {unknown}")
    for method, recording in recordings.items():
        parameters = inspect.signature(getattr(BillingProvider, method)).parameters
        if recording is not None and recording.key not in (None, *parameters):
            raise TypeError(f"{method} takes no argument {recording.key!r}")


check_recordings(RECORDINGS)


def current_command_id() -> str | None:
    """The command the runner is running in this context, if any."""
    command_id = log_context.current().get("command_id")
    return command_id if isinstance(command_id, str) and command_id != "(invalid)" else None


def _outcome(error: BaseException) -> tuple[CallOutcome, str]:
    if isinstance(error, TransientError):
        return CallOutcome.RETRYABLE, error.message
    if isinstance(error, CommandError):
        return CallOutcome.REFUSED, f"{error.code.name}: {error.message}"
    return CallOutcome.CRASHED, f"{type(error).__name__}: {error}"


def recorded(provider: BillingProvider, log: ProviderCallLog, clock: Clock) -> BillingProvider:
    """``provider``, with each call of a command (and each write) kept in ``log``."""
    # The cast is checked where mypy cannot: the class has one forwarder per port method,
    # built from RECORDINGS, which check_recordings holds to the port at import.
    return cast(BillingProvider, RecordedProvider(provider, log, clock))


class RecordedProvider:
    """The recording wrapper (made by :func:`recorded`); its port methods are set below, one
    per row of :data:`RECORDINGS`."""

    def __init__(self, provider: BillingProvider, log: ProviderCallLog, clock: Clock) -> None:
        self._provider = provider
        self._log = log
        self._clock = clock

    @property
    def name(self) -> str:
        return self._provider.name

    def _recorded(
        self, operation: str, subject: str | None, key: str | None, call: Callable[[], T]
    ) -> T:
        command_id = current_command_id()
        if command_id is None and key is None:
            return call()  # a read outside any command: not part of anyone's story
        started_at = self._clock.now()
        began = time.perf_counter()
        outcome: CallOutcome | None = CallOutcome.SUCCEEDED
        error: str | None = None
        try:
            return call()
        except RateLimited:
            outcome = None  # the budget held the call back: nothing was sent
            raise
        except BaseException as failure:
            outcome, error = _outcome(failure)
            raise
        finally:
            if outcome is not None:
                self._keep(
                    ProviderCall(
                        operation=operation,
                        subject=subject,
                        command_id=command_id,
                        idempotency_key=key,
                        outcome=outcome,
                        error=None if error is None else mask_text(error),
                        started_at=started_at,
                        duration_ms=round((time.perf_counter() - began) * 1000),
                    )
                )

    def _recorded_pages(
        self, operation: str, subject: str | None, pages: Iterator[T]
    ) -> Iterator[T]:
        """``pages``, each page's read recorded as one call of ``operation``."""
        while True:
            # The read past the last page finds the list's end: no call is made, and it is
            # recorded as one all the same (outside a command, nothing is recorded).
            page = self._recorded(operation, subject, None, partial(next, pages, None))
            if page is None:
                return
            yield page

    def _keep(self, call: ProviderCall) -> None:
        try:
            self._log.record(call)
        except Exception:  # the call matters more than its record
            logger.warning("could not record the provider call %s", call.operation, exc_info=True)


def _forwarder(method: str, recording: Recording | None) -> Callable[..., Any]:
    """``method`` of the port, passed on to the wrapped provider (and recorded)."""
    port_method = getattr(BillingProvider, method)
    signature = inspect.signature(port_method)

    @functools.wraps(port_method)
    def forward(self: RecordedProvider, /, *args: Any, **kwargs: Any) -> Any:
        call = functools.partial(getattr(self._provider, method), *args, **kwargs)
        if recording is None:
            return call()
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        arguments = bound.arguments
        key = None if recording.key is None else arguments[recording.key]
        subject = recording.subject(arguments)
        if recording.pages:
            return self._recorded_pages(method, subject, call())
        return self._recorded(method, subject, key, call)

    forward.__qualname__ = f"{RecordedProvider.__qualname__}.{method}"  # for tracebacks
    forward.__module__ = __name__
    return forward


for _method, _recording in RECORDINGS.items():
    setattr(RecordedProvider, _method, _forwarder(_method, _recording))
