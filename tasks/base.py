"""The one way a command runs as a Celery task: the glue around the runner.

The runner (``application.command_runner``) decides how a delivery ends; this module carries
its outcome out the way Celery does it: a result is returned, a retry is sent with
``Task.retry`` (a wait for the provider's rate budget is sent again with its retry count
unchanged), and a command that ended without doing its work ends the task ``FAILURE``. The
relay of the events it wrote starts once the task returned (:meth:`CommandTask.after_return`).

A command that ends without doing its work ends ``rejected`` (the caller's mistake) or
``failed`` (for an operator), as ``domain.operations.outcomes`` decides from its error body.

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
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Self

from billiard.einfo import ExceptionInfo
from celery.exceptions import Reject, Retry

from application import log_context
from application.command_outcomes import (
    Delivery,
    Ended,
    RetryLater,
    Succeeded,
    WaitForBudget,
    relay_after_command,
)
from application.command_runner import C, Handler, run_command
from domain.operations.outcomes import error_line
from domain.redaction import mask_text
from tasks.runtime import ApplicationTask


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


@contextmanager
def _kept_if_unsent() -> Iterator[None]:
    """A later delivery that cannot be sent (the broker away: a failover) leaves this one on
    the queue. Celery drops the message then (``Reject(requeue=False)`` from ``Task.retry``),
    and the command, ``retrying`` in the log, would wait for nobody."""
    try:
        yield
    except Reject as rejected:
        reason = rejected.args[0] if rejected.args else rejected  # the stubs lack .reason
        raise Reject(reason, requeue=True) from rejected
    except Exception as error:  # apply_async's own publish error
        raise Reject(error, requeue=True) from error


RESUMES_HEADER = "billing_resumes_run"
"""The message header that carries a run's mark to the next delivery when the run's end could
not be recorded (``Delivery.resumes``). Celery hands a message's own headers to the task as
attributes of its request, and copies them into its retries: each retry sets or drops the
mark, so that it travels one delivery only."""


def _resuming(request: Any, resumes: datetime | None) -> dict[str, Any]:
    """The next delivery's headers: those Celery copies, with the run's mark if ``resumes``,
    without an earlier one's."""
    headers = dict(request.as_execution_options().get("headers") or {})
    headers.pop(RESUMES_HEADER, None)
    if resumes is not None:
        headers[RESUMES_HEADER] = resumes.isoformat()
    return {"headers": headers}


def _resumed_run(request: Any) -> datetime | None:
    """The mark a message carries (:data:`RESUMES_HEADER`), if a valid one."""
    mark = getattr(request, RESUMES_HEADER, None)
    if not isinstance(mark, str):
        return None
    try:
        resumed = datetime.fromisoformat(mark)
    except ValueError:
        return None
    return resumed if resumed.tzinfo is not None else None


class CommandRejected(CommandFailed):
    """The command was the caller's mistake (``rejected``, ``domain.operations.outcomes``); a
    :class:`CommandFailed`, so that code catching that catches both."""


def _body_of(shown: str) -> dict[str, Any]:
    try:
        body = json.loads(shown)
    except ValueError:
        body = None
    return body if isinstance(body, dict) else {"message": shown}


class CommandTask(ApplicationTask):
    """Base class of every command task (``bind=True``)."""

    # Expected outcomes: logged without a traceback; Celery's state is FAILURE, which our Flower
    # shows as REJECTED for a caller's mistake (worker/launch/flower.py).
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
        request = self.request
        delivery = Delivery(
            task_name=self.name,
            task_id=str(request.id),
            retries=request.retries,
            queue=str((request.delivery_info or {}).get("routing_key") or "?"),
            args=args,
            kwargs=kwargs,
            resumes=_resumed_run(request),
        )
        outcome = run_command(self.application, command_type, handler, delivery)
        failure: BaseException
        match outcome:
            case Succeeded(shown=shown, relay=relay):
                self._relay_after_return(relay)
                return shown
            case Ended(error=error, rejected=rejected, masked=masked, relay=relay):
                self._relay_after_return(relay)
                failure = (CommandRejected if rejected else CommandFailed).of(error, masked=masked)
            case RetryLater(delay=delay, resumes=resumes):
                with _kept_if_unsent():
                    failure = self.retry(
                        countdown=delay,
                        max_retries=None,
                        throw=False,
                        **_resuming(request, resumes),
                    )
            case WaitForBudget(delay=delay, resumes=resumes):
                # Sent again as ``Task.retry`` sends it, but with its retry count unchanged.
                signature = self.signature_from_request(
                    request, countdown=delay, retries=request.retries, **_resuming(request, resumes)
                )
                with _kept_if_unsent():
                    signature.apply_async()
                waiting = f"waiting {delay:.2f}s for the rate budget"
                failure = Retry(waiting, when=delay, sig=signature)  # type: ignore[arg-type]
        # Raised as if while handling the runner's ``cause`` (Python keeps a context set
        # before a raise outside an ``except``): the retry metric's reason is read from it.
        failure.__context__ = outcome.cause
        raise failure

    def _relay_after_return(self, relay: bool) -> None:
        """``relay``: this delivery wrote events; relay them once the task returned."""
        if relay:
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
