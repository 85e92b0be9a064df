"""The record of each call made to the billing provider, for the operator's timeline.

The task runner's command log says that a command was retried; this says what each attempt
asked the provider, under which idempotency key, and what came back. A call is recorded
after it returns or raises, in a short transaction of its own (never the handler's): a
handler calls the provider outside any transaction, and a lost record never fails a call.

Recorded: every call made while a command runs (its id is known), and every write made
outside one (an operator's ``subscriptions create``). Reads outside a command (the
reconciliation sweep, the drift report, the console's own invoice reads) are not: they
would drown the timeline.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol


class CallOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    RETRYABLE = "retryable"
    """The provider (or the network) failed in a way worth retrying: 429, 5xx, a timeout."""
    REFUSED = "refused"
    """The provider refused the request for good (a 4xx)."""
    CRASHED = "crashed"
    """Something else went wrong around the call (a bug, our credentials)."""


@dataclass(frozen=True)
class ProviderCall:
    """One call to the provider, as it happened."""

    operation: str
    """What was asked, such as ``create_customer``."""
    subject: str | None
    """What the call is about, ``type:id``: ``billing_account:ba_…`` when the account is
    named, else the provider's object (``customer:cus_…``, ``subscription:sub_…``)."""
    command_id: str | None
    idempotency_key: str | None
    outcome: CallOutcome
    error: str | None
    """The error's message, personal data masked (a provider's message may quote input)."""
    started_at: datetime
    duration_ms: int


class ProviderCallLog(Protocol):
    """Where provider calls are recorded (``adapters/db/provider_calls.py``)."""

    def record(self, call: ProviderCall) -> None:
        """Keep ``call``, numbered as the next attempt of its idempotency key (or, without
        one, of its command, operation and subject)."""
        ...
