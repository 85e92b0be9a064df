"""The one way a command runs: one delivery of its message, from the queue's runner.

parse the message → record it running → run the handler → record the outcome, and classify
what went wrong: a message that does not validate and a :class:`CommandError` end the
command (recorded, never retried); a :class:`TransientError` or a transient database error is
retried with backoff within the budget; anything else is a bug, recorded as ``INTERNAL``.
A :class:`RateLimited` is no failure at all: the command waits (sent again once the
provider's rate budget has its token), and its retry budget stays whole.

A command that ends without doing its work ends ``rejected`` (the caller's mistake) or
``failed`` (for an operator), as ``domain.operations.outcomes`` decides from its error body; each is
recorded with its event (``command.rejected``, ``command.failed``).

The runner decides; it knows no queue. It returns the delivery's outcome
(``application.command_outcomes``), which the Celery task (``tasks/base.py``) carries out:
it returns a result, raises the failure, or sends the message again.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from application import log_context
from application.command_outcomes import (
    Delivery,
    DeliveryOutcome,
    Ended,
    RetryLater,
    Succeeded,
    WaitForBudget,
    replayed,
    shown,
)
from application.one_transaction import InOneTransaction
from application.retry import RetryPolicy
from domain.errors import (
    CommandError,
    CommandIdReused,
    CommandInProgress,
    ErrorCode,
    Internal,
    InvalidArgument,
    TransientError,
    Unavailable,
    error_info,
    field_violations,
    violations_of,
)
from domain.events.commands import CommandFailedEvent, CommandRejectedEvent
from domain.messages import Command, CommandStatus, Result, is_id, storable, unstorable_values
from domain.operations.outcomes import ended_as
from domain.ports.application import Application, HandlerContext
from domain.ports.commands import CommandOutcome
from domain.ports.repositories import UnitOfWork
from domain.provider.rate_budget import RateLimited, calls_at

logger = logging.getLogger(__name__)

C = TypeVar("C", bound=Command)
Handler = Callable[[C, HandlerContext], Result]


def run_command(
    svc: Application, command_type: type[C], handler: Handler[C], delivery: Delivery
) -> DeliveryOutcome:
    """Run one delivery of a ``command_type`` message with ``handler``, and say how it ended."""
    return _Delivered(svc, command_type, handler, delivery).run()


def retry_policy(svc: Application) -> RetryPolicy:
    """The backoff of the application's policy."""
    policy = svc.policy
    return RetryPolicy(
        policy.retry_max_attempts,
        policy.retry_base_delay_seconds,
        policy.retry_max_delay_seconds,
    )


def _validation_error(error: ValidationError) -> InvalidArgument:
    return InvalidArgument.for_fields(
        "the command message is invalid", violations_of(error.errors(include_url=False))
    )


class _Delivered(Generic[C]):
    """One delivery of one command's message, run to its outcome."""

    def __init__(
        self, svc: Application, command_type: type[C], handler: Handler[C], delivery: Delivery
    ) -> None:
        self.svc = svc
        self.command_type = command_type
        self.handler = handler
        self.delivery = delivery
        self.started_at = svc.clock.now()
        """The mark of this delivery's run (``CommandJournal.begin``)."""
        self.events_before = svc.events_written()

    def _wrote_events(self) -> bool:
        """Whether this delivery wrote events (the relay has something of its own to carry):
        a due change staged, a replay, write none, and ask for no relay (whose lock, read and
        transaction cost a period-end burst's change 3 % of its CPU)."""
        return self.svc.events_written() != self.events_before

    def run(self) -> DeliveryOutcome:
        svc, command_type, delivery = self.svc, self.command_type, self.delivery
        given_id = delivery.kwargs.get("command_id")
        # A malformed id is reported by validation; the log entry then uses the task id.
        command_id = given_id if is_id(given_id, max_length=64) else delivery.task_id
        self._log_as(command_id, delivery.kwargs)
        payload = {"command_id": command_id, **delivery.kwargs}
        # Values no database keeps (NUL, NaN…) are journalled escaped, and fail the command.
        unstorable = unstorable_values(payload)
        if unstorable:
            payload = storable(payload)
        if command_type.IN_ONE_TRANSACTION and not unstorable and not delivery.args:
            outcome = self._in_one_transaction(command_id, payload)
            if outcome is not None:
                return replayed(
                    svc,
                    outcome.status,
                    outcome.result,
                    outcome.error,
                    relay=outcome.status is CommandStatus.SUCCEEDED and self._wrote_events(),
                )
        # The API records its commands before publishing them; an entry first made here is a
        # command another service published straight onto the queue.
        try:
            finished = svc.commands.begin(
                command_id,
                command_type.TASK_NAME,
                payload,
                source="queue",
                at=self.started_at,
                resumes=delivery.resumes,
            )
        except CommandIdReused as reused:
            return self._refuse_reused_id(reused, payload)
        except CommandInProgress as busy:
            # A duplicate message: look again once the running delivery has finished (then
            # this one replays its outcome), or its lease ran out (its worker died).
            return RetryLater(self._delay(), cause=busy)
        except Exception as error:
            if not svc.is_transient(error):
                raise
            # The database could not take the start: keep the message. A try whose commit
            # went through unanswered left the command running as of ``started_at``: the
            # next delivery takes that run over rather than wait out its lease.
            return RetryLater(self._delay(), cause=error, resumes=self.started_at)
        if finished is not None:
            return replayed(svc, finished.status, finished.result, finished.error)
        return self._run(command_id, payload, unstorable)

    def _run(
        self, command_id: str, payload: dict[str, Any], unstorable: list[tuple[str, str]]
    ) -> DeliveryOutcome:
        """Run a command that :meth:`CommandJournal.begin` marked running, and record how
        it ended."""
        svc, command_type = self.svc, self.command_type
        try:
            if unstorable:
                raise InvalidArgument.for_fields(
                    "the command message holds values that cannot be stored", unstorable
                )
            if self.delivery.args:
                raise InvalidArgument.for_fields(
                    "commands take keyword arguments only",
                    [("args", "send the command's fields as kwargs")],
                )
            try:
                command = command_type.model_validate(payload)
            except ValidationError as error:
                raise _validation_error(error) from None
            self._log_as(command_id, dict(command))
            with calls_at(command_type.PRIORITY):
                result = self.handler(command, svc)
        except CommandError as error:
            return self._fail(command_id, error)
        except TransientError as error:
            return self._retry_or_fail(command_id, error, error.message, error.retry_after)
        except RateLimited as waiting:
            return self._wait_for_budget(command_id, waiting)
        except Exception as error:
            if svc.is_transient(error):
                return self._retry_or_fail(command_id, error, f"database: {error}", None)
            logger.exception("command %s (%s) crashed", command_id, command_type.TASK_NAME)
            return self._fail(
                command_id,
                Internal(
                    "internal error",
                    details=[error_info("UNEXPECTED", exception=type(error).__name__)],
                ),
            )

        body = result.model_dump(mode="json")
        try:
            svc.commands.succeed(command_id, body)
        except Exception as error:
            if not svc.is_transient(error):
                raise
            # The work is done but its outcome is not recorded: run again later (handlers
            # are idempotent, so the provider sees no second effect), which records it.
            return RetryLater(self._delay(), cause=error, resumes=self.started_at)
        return Succeeded(shown(svc, body), relay=self._wrote_events())

    def _in_one_transaction(
        self, command_id: str, payload: dict[str, Any]
    ) -> CommandOutcome | None:
        """Run the command in one transaction (``Command.IN_ONE_TRANSACTION``), and return
        its outcome; ``None``: it runs the usual way (:meth:`_run`)."""
        svc, command_type, handler = self.svc, self.command_type, self.handler
        try:
            command = command_type.model_validate(payload)
        except ValidationError:
            return None
        self._log_as(command_id, dict(command))

        def work(uow: UnitOfWork) -> dict[str, Any]:
            with calls_at(command_type.PRIORITY):
                return handler(command, InOneTransaction(svc, uow)).model_dump(mode="json")

        try:
            return svc.commands.run_in_one_transaction(
                command_id, command_type.TASK_NAME, payload, source="queue", work=work
            )
        except Exception as error:
            # Nothing was recorded: the usual way runs the handler again and records how the
            # command ends (an error of the caller's, a busy database, a racing delivery…).
            logger.debug("command %s runs the usual way: %r", command_id, error)
            return None

    def _log_as(self, command_id: str, values: dict[str, Any]) -> None:
        """Every line logged while this delivery runs names the command
        (application.log_context)."""
        log_context.bind(
            log_context.command_fields(
                command_id=command_id,
                task=self.delivery.task_name,
                task_id=self.delivery.task_id,
                attempt=self.delivery.attempt,
                values=values,
            )
        )

    def _delay(self, retry_after: float | None = None) -> float:
        return retry_policy(self.svc).delay(self.delivery.retries, retry_after)

    def _refuse_reused_id(self, reused: CommandIdReused, payload: dict[str, Any]) -> Ended:
        """Another message under a recorded command's id: it is not that command, so it
        neither runs nor replays that command's outcome. It is kept as a dead letter and fails
        as a delivery (Flower shows it); the recorded command stays as it was."""
        svc, delivery = self.svc, self.delivery
        error = InvalidArgument(
            f"command id {reused.command_id!r} is taken by another command "
            f"({reused.recorded_type}); send a new command id",
            details=[
                field_violations([("command_id", "names another command")]),
                error_info(
                    "COMMAND_ID_REUSED",
                    command_id=reused.command_id,
                    recorded_type=reused.recorded_type,
                ),
            ],
        )
        try:
            svc.dead_letters().add(
                json.dumps({"kwargs": payload}, default=str).encode(),
                queue=delivery.queue,
                reason=f"COMMAND_ID_REUSED: {error.message}",
                task=delivery.task_name,
                task_id=delivery.task_id,
            )
        except Exception:
            logger.warning("could not record the dead letter of %s", delivery.task_id)
        logger.error("message %s refused: %s", delivery.task_id, error.message)
        return Ended(
            error.to_body(), rejected=True, masked=svc.policy.mask_personal_data, cause=reused
        )

    def _fail(self, command_id: str, error: CommandError) -> Ended | RetryLater:
        """End the command ``rejected`` or ``failed`` (``domain.operations.outcomes``), with its
        event."""
        svc, task_name = self.svc, self.delivery.task_name
        body = error.to_body()
        now = svc.clock.now()
        rejected = ended_as(body) is CommandStatus.REJECTED
        try:
            if rejected:
                event = CommandRejectedEvent.of(command_id, task_name, body, now=now)
                svc.commands.reject(command_id, body, [event])
            else:
                svc.commands.fail(
                    command_id, body, [CommandFailedEvent.of(command_id, task_name, body, now=now)]
                )
        except Exception as journal_error:
            if not svc.is_transient(journal_error):
                raise
            # The outcome could not be recorded: run again later rather than lose it.
            return RetryLater(self._delay(), cause=journal_error, resumes=self.started_at)
        # Not chained to the error it reports (no ``cause``): Celery shows a failure's
        # traceback (the result backend), and the error's message may quote input (a
        # provider's 4xx).
        return Ended(body, rejected=rejected, masked=svc.policy.mask_personal_data, relay=True)

    def _wait_for_budget(self, command_id: str, waiting: RateLimited) -> WaitForBudget:
        """Give the process back until the budget's token is due; the retry count stays as it
        is: waiting for the rate limit must not use up the budget kept for real failures."""
        # A little spread, so that commands told the same moment do not all come back in it.
        delay = waiting.wait_seconds * (1.0 + random.uniform(0.0, 0.1))  # noqa: S311
        resumes = None
        try:
            self.svc.commands.waiting(command_id, round(delay, 3))
        except Exception:  # the wait matters more than its record
            logger.warning("could not record the wait of %s", command_id, exc_info=True)
            resumes = self.started_at  # left running: the next delivery takes it over
        logger.info("command %s waits %.2fs for the stripe rate budget", command_id, delay)
        return WaitForBudget(delay, cause=waiting, resumes=resumes)

    def _retry_or_fail(
        self, command_id: str, failure: Exception, reason: str, retry_after: float | None
    ) -> Ended | RetryLater:
        policy = retry_policy(self.svc)
        retries = self.delivery.retries
        attempts_done = self.delivery.attempt
        if policy.exhausted(attempts_done):
            return self._fail(
                command_id,
                Unavailable(
                    f"gave up after {attempts_done} attempts: {reason}",
                    details=[error_info("RETRY_BUDGET_EXHAUSTED", attempts=str(attempts_done))],
                ),
            )
        delay = policy.delay(retries, retry_after)
        ceiling = policy.ceiling(retries)
        retrying = {
            "code": int(ErrorCode.UNAVAILABLE),
            "message": reason,
            "details": [
                error_info(
                    "TRANSIENT_FAILURE",
                    attempt=str(attempts_done),
                    retry_in_seconds=f"{delay:.3f}",
                )
            ],
        }
        retry = {
            "attempt": attempts_done,
            "reason": reason,
            "delay_seconds": round(delay, 3),
            "backoff_ceiling_seconds": round(ceiling, 3),
            "retry_after_seconds": retry_after,
        }
        resumes = None
        try:
            # The journal tries again for a while itself (a switchover's seconds without a
            # primary); past that the entry stays ``running``, and the retry takes that run
            # over (``resumes``) rather than wait for its lease to end.
            self.svc.commands.retrying(command_id, retrying, retry)
        except Exception:  # the retry matters more than its record
            logger.warning("could not record the retry of %s", command_id, exc_info=True)
            resumes = self.started_at
        logger.warning(
            "command %s attempt %d failed transiently (%s); retry in %.2fs",
            command_id,
            attempts_done,
            reason,
            delay,
        )
        return RetryLater(delay, cause=failure, resumes=resumes)
