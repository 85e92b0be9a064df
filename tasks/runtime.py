"""How tasks reach the application: through the Celery app that runs them.

Tasks are declared with ``@shared_task``, so this package names no Celery app. The
composition root (``worker.celery_app``) creates a :class:`CommandApp` carrying the factory
of this process's :class:`~domain.ports.application.Application`; a task reads it from ``self.app``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from celery import Celery, Task
from celery.signals import task_postrun
from celery.utils import uuid

from application import log_context
from domain.ports.application import Application

if TYPE_CHECKING:
    _TaskBase = Task[Any, Any]
else:
    _TaskBase = Task


class CommandApp(Celery):
    """A Celery app that carries the application its tasks run with."""

    def __init__(self, main: str, *, application: Callable[[], Application], **kwargs: Any) -> None:
        super().__init__(main, **kwargs)
        self.application = application


class ApplicationTask(_TaskBase):
    """Base of every task: ``self.application`` is this process's application."""

    @property
    def application(self) -> Application:
        app = self.app
        if not isinstance(app, CommandApp):
            raise RuntimeError(
                f"task {self.name} runs in a CommandApp (worker.celery_app), not {app!r}"
            )
        return app.application()

    def before_start(self, task_id: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Every run (a first delivery, a retry, a redelivery, a sweep) starts with no command
        bound in this process's context; the token puts the context back when it ends
        (:func:`_end_log_context`, on every outcome including a retry)."""
        self.request.log_context_token = log_context.begin_run()  # type: ignore[attr-defined]


def _end_log_context(sender: Any = None, **_: Any) -> None:
    request: Any = getattr(sender, "request", None)
    token = getattr(request, "log_context_token", None)
    if token is not None:
        request.log_context_token = None
        log_context.end_run(token)


# Celery sends task_postrun after every run, a retry included, and after its own log line
# about the outcome (still in the command's context).
task_postrun.connect(_end_log_context, weak=False)


class SweepTask(ApplicationTask):
    """Base of beat's sweeps: periodic housekeeping, not work anyone asked for.

    A sweep sends no task events (``send_events``): Flower, which lists what the events tell
    it, shows the commands, not a sweep every second. The worker checks this flag for every
    task event (received, started, succeeded, failed, revoked), whatever ``-E`` or Flower's
    ``enable_events`` say; beat, their only publisher, sends no ``task-sent`` events either
    (``adapters.observability.signals``). Operators watch sweeps through metrics instead
    (``billing_sweep_last_success_timestamp_seconds``, alert ``BillingSweepStalled``).
    Delivery is unchanged: the same queue, late acknowledgement and expiry as before."""

    send_events = False

    def run_again_now(self, *, args: tuple[Any, ...] = (), expires: float) -> None:
        """Send this sweep's next run now, on its own queue, as beat would send it: without a
        ``task-sent`` event (``send_task`` would send one from a worker, and Flower would
        list the sweep among the commands). A run that waited ``expires`` seconds is
        dropped: beat's own next run has taken its place."""
        app = self.app
        message = app.amqp.create_task_message(
            uuid(), self.name, args, {}, expires=expires, create_sent_event=False
        )
        route = app.amqp.router.route({}, self.name, args, {})
        with app.producer_or_acquire() as producer:
            app.amqp.send_task_message(producer, self.name, message, **route)
