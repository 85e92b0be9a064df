"""How one delivery of a command ends, in the runner's words (no queue's): the outcome
:func:`application.command_runner.run_command` returns, which the queue's glue
(``tasks/base.py``) turns into a return value, a retry or a raised failure.

Also what is shown of an outcome (personal data masked where the policy asks) and the relay
of the events a finished command wrote.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from application.handlers.events.relay import COMMANDS_BATCHES, relay_for_commands
from application.requests.sweeps import RelayEvents
from domain.errors import ErrorCode
from domain.messages import CommandStatus
from domain.ports.application import Application
from domain.redaction import redact

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delivery:
    """One delivery of a command's message, as the queue hands it to the runner."""

    task_name: str
    task_id: str
    retries: int
    """Retries already made of this message (``0`` on its first delivery)."""
    queue: str
    """The queue it came from (``?`` when the broker did not say): where a refused message
    is kept as a dead letter."""
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    resumes: datetime | None = None
    """The mark of the run the delivery before this one began and could not record the end
    of (``CommandJournal.begin``): this delivery takes that run over."""

    @property
    def attempt(self) -> int:
        return self.retries + 1


@dataclass(frozen=True)
class Succeeded:
    """The command did its work (now, or in an earlier delivery): ``shown`` is the delivery's
    return value. ``relay``: this delivery wrote events, relay them once it returned."""

    shown: dict[str, Any]
    relay: bool = False


@dataclass(frozen=True)
class Ended:
    """The command ended without doing its work, ``rejected`` (the caller's mistake) or
    ``failed``: the delivery fails with ``error``, its body (``masked``: personal data is
    masked where it is shown)."""

    error: dict[str, Any]
    rejected: bool
    masked: bool
    relay: bool = False
    cause: BaseException | None = None


@dataclass(frozen=True)
class RetryLater:
    """Send the message again in ``delay`` seconds, as one more retry (a transient failure,
    a duplicate delivery running now, a database that could not record the outcome)."""

    delay: float
    cause: BaseException
    resumes: datetime | None = None
    """The mark of this delivery's run when its end could not be recorded (the command is
    left running): the next delivery takes it over (:attr:`Delivery.resumes`)."""


@dataclass(frozen=True)
class WaitForBudget:
    """Send the message again in ``delay`` seconds with its retry count unchanged: waiting
    for the provider's rate budget is no failure."""

    delay: float
    cause: BaseException
    resumes: datetime | None = None
    """As :attr:`RetryLater.resumes`: the wait could not be recorded."""


DeliveryOutcome = Succeeded | Ended | RetryLater | WaitForBudget
"""Each but :class:`Succeeded` carries its ``cause``: the failure the runner was handling
when it decided, if any. The queue raises what ends the delivery in that context, as if
raised while handling it: a retry is labelled by it (``billing_command_retries``' reason)
and Celery's traceback of it shows it."""


def shown(svc: Application, result: dict[str, Any]) -> dict[str, Any]:
    """The delivery's return value: what Flower, Celery's events, the result backend and the
    logs show of a result. Personal data is masked there (domain.redaction); the command
    log keeps the whole result, and the API answers from it."""
    if not svc.policy.mask_personal_data:
        return result
    masked: dict[str, Any] = redact(result)
    return masked


def replayed(
    svc: Application,
    status: CommandStatus,
    result: dict[str, Any] | None,
    error: dict[str, Any] | None,
    *,
    relay: bool = False,
) -> Succeeded | Ended:
    """The outcome of a command that finished: shown again as it ended."""
    if status is CommandStatus.SUCCEEDED:
        return Succeeded(shown(svc, result or {}), relay=relay)
    return Ended(
        error or {"code": int(ErrorCode.UNKNOWN), "message": "", "details": []},
        rejected=status is CommandStatus.REJECTED,
        masked=svc.policy.mask_personal_data,
        relay=relay,
    )


def relay_after_command(svc: Application) -> None:
    """Ask for the outbox to be relayed once a command's outcome is recorded, and return: the
    process relays in the background, one relay for every command that finished meanwhile
    (``Application.relay_soon``)."""
    svc.relay_soon(lambda: _relay_for_commands(svc))


def _relay_for_commands(svc: Application) -> bool:
    """``False``: another relay runs, ask again. A failure loses nothing (beat's sweep
    publishes what is left): logged, never raised."""
    try:
        return relay_for_commands(RelayEvents(max_batches=COMMANDS_BATCHES), svc)
    except Exception:
        logger.warning("could not relay events now; beat's sweep will", exc_info=True)
        return True
