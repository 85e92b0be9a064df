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
