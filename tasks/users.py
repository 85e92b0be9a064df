"""Celery tasks for user commands. Task names are a public contract: never rename one."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from application.handlers.users import enable_user as handle_enable_user
from domain.users import EnableUser
from tasks.base import CommandTask


@shared_task(name=EnableUser.TASK_NAME, base=CommandTask, bind=True)
def enable_user(self: CommandTask, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return self.run_command(EnableUser, handle_enable_user, args, kwargs)
