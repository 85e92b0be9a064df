"""How tasks reach the application: through the Celery app that runs them.

Tasks are declared with ``@shared_task``, so this package names no Celery app. The
composition root (``worker.celery_app``) creates a :class:`CommandApp` carrying the factory
of this process's :class:`~domain.ports.Application`; a task reads it from ``self.app``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from celery import Celery, Task

from domain.ports import Application

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


class SweepTask(ApplicationTask):
    """Base of beat's sweeps: periodic housekeeping, not work anyone asked for.

    A sweep sends no task events (``send_events``): Flower, which lists what the events tell
    it, shows the commands, not a sweep every second. The worker checks this flag for every
    task event (received, started, succeeded, failed, revoked), whatever ``-E`` or Flower's
    ``enable_events`` say; beat, their only publisher, sends no ``task-sent`` events either
    (``worker.observability.signals``). Operators watch sweeps through metrics instead
    (``billing_sweep_last_success_timestamp_seconds``, alert ``BillingSweepStalled``).
    Delivery is unchanged: the same queue, late acknowledgement and expiry as before."""

    send_events = False
