"""The one way a command runs as a Celery task.

parse the message → record it running → run the handler → record the outcome, and classify
what went wrong: a message that does not validate and a :class:`CommandError` end the
command (recorded, never retried); a :class:`TransientError` or a transient database error is
retried with backoff within the budget; anything else is a bug, recorded as ``INTERNAL``.
A :class:`RateLimited` is no failure at all: the command waits (re-queued until the
provider's rate budget has its token), and its retry budget stays whole.

A command that ends without doing its work ends ``rejected`` (the caller's mistake) or
``failed`` (for an operator), as ``domain.operations.outcomes`` decides from its error body; each is
recorded with its event (``command.rejected``, ``command.failed``).

**What Celery shows of it.** Both end the task in Celery's ``FAILURE`` state, raising
:class:`CommandRejected` or :class:`CommandFailed`, rather than returning a result that says
``rejected``: a queue publisher's ``AsyncResult.get()`` raises and ``.failed()`` is true for
any command that did not do its work, as before, and a rejection is told apart by its
exception's type (``CommandRejected``, a ``CommandFailed``: code that catches the latter
catches both). The exception's arguments stay the error body as JSON (personal data masked),
which the result backend keeps and a publisher reads; its ``repr`` (what Flower, the
task-failed event and the worker's log line show) is one readable line: code, reason,
message and the fields it blames. Neither carries a traceback to Flower: the outcome is the
runner's decision, not a crash (a crash's own traceback is logged where it happened), so
:meth:`CommandTask.on_failure` drops the runner's frames from what the task-failed event
carries. The HTTP API answers from the command log, so it answers as before.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from typing import Any, NoReturn, Self, TypeVar

from billiard.einfo import ExceptionInfo
from celery.exceptions import Retry
from pydantic import ValidationError

from application import log_context
from application.handlers.events import COMMANDS_BATCHES, relay_for_commands
from application.one_transaction import InOneTransaction
from application.requests.sweeps import RelayEvents
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
from domain.operations.outcomes import ended_as, error_line
from domain.ports.application import Application, HandlerContext
from domain.ports.commands import CommandOutcome
from domain.ports.repositories import UnitOfWork
from domain.provider.rate_budget import RateLimited, calls_at
from domain.redaction import mask_text, redact
from tasks.runtime import ApplicationTask

logger = logging.getLogger(__name__)

C = TypeVar("C", bound=Command)
Handler = Callable[[C, HandlerContext], Result]


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


class CommandFailed(Exception):
    """Raised so that Celery (and Flower) mark the task failed; carries the error body.

    Its one argument is the body as JSON, with personal data masked unless made with
    ``masked=False``: what the result backend keeps and a queue publisher reads. Its ``repr``
    (Flower, Celery's events, the worker's log) is one readable line of the same, masked.
    ``error`` is the whole body (in this process only)."""

    def __init__(self, shown: str, error: dict[str, Any] | None = None) -> None:
        # Celery rebuilds the exception from its arguments (pickled between the pool's
        # processes): ``shown`` alone must make it whole again.
        super().__init__(shown)
        self.error: dict[str, Any] = error if error is not None else _body_of(shown)

    @classmethod
    def of(cls, error: dict[str, Any], *, masked: bool = True) -> Self:
        shown = json.dumps(error, sort_keys=True)
        return cls(mask_text(shown) if masked else shown, error)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({error_line(_body_of(str(self.args[0])))})"


class CommandRejected(CommandFailed):
    """The command was the caller's mistake (``rejected``, ``domain.operations.outcomes``); a
    :class:`CommandFailed`, so that code catching that catches both."""


def _body_of(shown: str) -> dict[str, Any]:
    try:
        body = json.loads(shown)
    except ValueError:
        body = None
    return body if isinstance(body, dict) else {"message": shown}


def _validation_error(error: ValidationError) -> InvalidArgument:
    return InvalidArgument.for_fields(
        "the command message is invalid", violations_of(error.errors(include_url=False))
    )


class CommandTask(ApplicationTask):
    """Base class of every command task (``bind=True``)."""

    # Expected outcomes: logged without a traceback, still shown as FAILURE in Flower.
    throws = (CommandFailed,)
    # Retries are ours (budget, jitter, Retry-After); Celery's own counter is only a backstop.
    max_retries = None

    def run_command(
        self,
        command_type: type[C],
        handler: Handler[C],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> dict[str, Any]:
        svc = self.application
        given_id = kwargs.get("command_id")
        # A malformed id is reported by validation; the log entry then uses the task id.
        command_id = given_id if is_id(given_id, max_length=64) else str(self.request.id)
        self._log_as(command_id, kwargs)
        payload = {"command_id": command_id, **kwargs}
        # Values no database keeps (NUL, NaN…) are journalled escaped, and fail the command.
        unstorable = unstorable_values(payload)
        if unstorable:
            payload = storable(payload)
        if command_type.IN_ONE_TRANSACTION and not unstorable and not args:
            outcome = self._in_one_transaction(svc, command_id, command_type, handler, payload)
            if outcome is not None:
                if outcome.status is CommandStatus.SUCCEEDED:
                    self._relay_after_return()
                return self._replay(svc, outcome.status, outcome.result, outcome.error)
        # The API records its commands before publishing them; an entry first made here is a
        # command another service published straight onto the queue.
        try:
            finished = svc.commands.begin(
                command_id, command_type.TASK_NAME, payload, source="queue"
            )
        except CommandIdReused as reused:
            self._refuse_reused_id(svc, reused, payload)
        except CommandInProgress as busy:
            # A duplicate message: look again once the running delivery has finished (then
            # this one replays its outcome), or its lease ran out (its worker died).
            delay = self._policy(svc).delay(self.request.retries)
            raise self.retry(countdown=delay, max_retries=None) from busy
        except Exception as error:
            if not svc.is_transient(error):
                raise
            # Nothing is recorded yet and the database is unreachable: keep the message.
            raise self.retry(countdown=self._policy(svc).delay(self.request.retries)) from error
        if finished is not None:
            return self._replay(svc, finished.status, finished.result, finished.error)
        return self._run(svc, command_id, command_type, handler, payload, args, unstorable)

    def _run(
        self,
        svc: Application,
        command_id: str,
        command_type: type[C],
        handler: Handler[C],
        payload: dict[str, Any],
        args: tuple[Any, ...],
        unstorable: list[tuple[str, str]],
    ) -> dict[str, Any]:
        """Run a command that :meth:`CommandJournal.begin` marked running, and record how
        it ended."""
        try:
            if unstorable:
                raise InvalidArgument.for_fields(
                    "the command message holds values that cannot be stored", unstorable
                )
            if args:
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
                result = handler(command, svc)
        except CommandError as error:
            return self._fail(svc, command_id, error)
        except TransientError as error:
            return self._retry_or_fail(svc, command_id, error.message, error.retry_after)
        except RateLimited as waiting:
            return self._wait_for_budget(svc, command_id, waiting)
        except Exception as error:
            if svc.is_transient(error):
                return self._retry_or_fail(svc, command_id, f"database: {error}", None)
            logger.exception("command %s (%s) crashed", command_id, command_type.TASK_NAME)
            return self._fail(
                svc,
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
            raise self.retry(countdown=self._policy(svc).delay(self.request.retries)) from error
        self._relay_after_return()
        return self._shown(svc, body)

    def _in_one_transaction(
        self,
        svc: Application,
        command_id: str,
        command_type: type[C],
        handler: Handler[C],
        payload: dict[str, Any],
    ) -> CommandOutcome | None:
        """Run the command in one transaction (``Command.IN_ONE_TRANSACTION``), and return
        its outcome; ``None``: it runs the usual way (:meth:`_run`)."""
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
                task=self.name,
                task_id=str(self.request.id),
                attempt=self.request.retries + 1,
                values=values,
            )
        )

    def _relay_after_return(self) -> None:
        """This delivery wrote events: ask for the relay once the task returned."""
        self.request.relay_after_return = True  # type: ignore[attr-defined]

    def after_return(self, *args: Any, **kwargs: Any) -> None:
        # Celery has stored the result by now (a client waiting on it is told) and logged the
        # outcome (in the command's context): the relay starts after both, not before.
        if getattr(self.request, "relay_after_return", False):
            relay_after_command(self.application)
        log_context.unbind()  # a retry has no after_return: task_postrun resets it then

    def on_failure(
        self,
        exc: Exception,
        task_id: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        einfo: ExceptionInfo,
    ) -> None:
        """A rejection or a failure the runner decided on is an outcome, not a crash: the
        task-failed event (Flower) carries its one-line ``repr`` and no traceback (the
        runner's own frames, the same for every command). Called in the worker's child with
        the ``ExceptionInfo`` it then hands to the worker, which sends the event from it."""
        if isinstance(exc, CommandFailed):
            einfo.traceback = None

    @staticmethod
    def _shown(svc: Application, result: dict[str, Any]) -> dict[str, Any]:
        """The task's return value: what Flower, Celery's events, the result backend and the
        logs show of a result. Personal data is masked there (domain.redaction); the command
        log keeps the whole result, and the API answers from it."""
        if not svc.policy.mask_personal_data:
            return result
        shown: dict[str, Any] = redact(result)
        return shown

    def _refuse_reused_id(
        self, svc: Application, reused: CommandIdReused, payload: dict[str, Any]
    ) -> NoReturn:
        """Another message under a recorded command's id: it is not that command, so it
        neither runs nor replays that command's outcome. It is kept as a dead letter and fails
        as a task (Flower shows it); the recorded command stays as it was."""
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
        queue = (self.request.delivery_info or {}).get("routing_key") or "?"
        try:
            svc.dead_letters().add(
                json.dumps({"kwargs": payload}, default=str).encode(),
                queue=str(queue),
                reason=f"COMMAND_ID_REUSED: {error.message}",
                task=self.name,
                task_id=str(self.request.id),
            )
        except Exception:
            logger.warning("could not record the dead letter of %s", self.request.id)
        logger.error("message %s refused: %s", self.request.id, error.message)
        raise CommandRejected.of(error.to_body(), masked=svc.policy.mask_personal_data)

    def _replay(
        self,
        svc: Application,
        status: CommandStatus,
        result: dict[str, Any] | None,
        error: dict[str, Any] | None,
    ) -> dict[str, Any]:
        if status is CommandStatus.SUCCEEDED:
            return self._shown(svc, result or {})
        ended = CommandRejected if status is CommandStatus.REJECTED else CommandFailed
        raise ended.of(
            error or {"code": int(ErrorCode.UNKNOWN), "message": "", "details": []},
            masked=svc.policy.mask_personal_data,
        )

    @staticmethod
    def _policy(svc: Application) -> RetryPolicy:
        policy = svc.policy
        return RetryPolicy(
            policy.retry_max_attempts,
            policy.retry_base_delay_seconds,
            policy.retry_max_delay_seconds,
        )

    def _fail(self, svc: Application, command_id: str, error: CommandError) -> dict[str, Any]:
        """End the command ``rejected`` or ``failed`` (``domain.operations.outcomes``), with its
        event."""
        body = error.to_body()
        now = svc.clock.now()
        rejected = ended_as(body) is CommandStatus.REJECTED
        try:
            if rejected:
                event = CommandRejectedEvent.of(command_id, self.name, body, now=now)
                svc.commands.reject(command_id, body, [event])
            else:
                svc.commands.fail(
                    command_id, body, [CommandFailedEvent.of(command_id, self.name, body, now=now)]
                )
        except Exception as journal_error:
            if not svc.is_transient(journal_error):
                raise
            # The outcome could not be recorded: run again later rather than lose it.
            delay = self._policy(svc).delay(self.request.retries)
            raise self.retry(countdown=delay) from journal_error
        self._relay_after_return()
        # Not chained to the error it reports: Celery shows a failure's traceback (the
        # result backend), and the error's message may quote input (a provider's 4xx).
        ended = CommandRejected if rejected else CommandFailed
        raise ended.of(body, masked=svc.policy.mask_personal_data) from None

    def _wait_for_budget(
        self, svc: Application, command_id: str, waiting: RateLimited
    ) -> dict[str, Any]:
        """Give the process back until the budget's token is due. The message is sent again
        as ``Task.retry`` sends it, but with its retry count unchanged: waiting for the rate
        limit must not use up the budget kept for real failures."""
        # A little spread, so that commands told the same moment do not all come back in it.
        delay = waiting.wait_seconds * (1.0 + random.uniform(0.0, 0.1))  # noqa: S311
        try:
            svc.commands.waiting(command_id, round(delay, 3))
        except Exception:  # the wait matters more than its record
            logger.warning("could not record the wait of %s", command_id, exc_info=True)
        logger.info("command %s waits %.2fs for the stripe rate budget", command_id, delay)
        request = self.request
        signature = self.signature_from_request(request, countdown=delay, retries=request.retries)
        signature.apply_async()
        raise Retry(f"waiting {delay:.2f}s for the rate budget", when=delay, sig=signature)  # type: ignore[arg-type]

    def _retry_or_fail(
        self, svc: Application, command_id: str, reason: str, retry_after: float | None
    ) -> dict[str, Any]:
        policy = self._policy(svc)
        attempts_done = self.request.retries + 1
        if policy.exhausted(attempts_done):
            return self._fail(
                svc,
                command_id,
                Unavailable(
                    f"gave up after {attempts_done} attempts: {reason}",
                    details=[error_info("RETRY_BUDGET_EXHAUSTED", attempts=str(attempts_done))],
                ),
            )
        delay = policy.delay(self.request.retries, retry_after)
        ceiling = policy.ceiling(self.request.retries)
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
        try:
            svc.commands.retrying(command_id, retrying, retry)
        except Exception:  # the retry matters more than its record
            logger.warning("could not record the retry of %s", command_id, exc_info=True)
        logger.warning(
            "command %s attempt %d failed transiently (%s); retry in %.2fs",
            command_id,
            attempts_done,
            reason,
            delay,
        )
        # Not chained to the failure: Celery shows a retry's traceback (Flower, the result
        # backend), and the failure's message was logged above, masked.
        raise self.retry(countdown=delay, max_retries=None) from None
