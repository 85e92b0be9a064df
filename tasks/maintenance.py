"""Periodic housekeeping run by celery beat. Task names are a public contract."""

from __future__ import annotations

from celery import shared_task

from tasks.handlers.sweeps import republish_stalled_commands as republish
from tasks.runtime import ApplicationTask

REPUBLISH_STALLED_COMMANDS = "maintenance.republish_stalled_commands"


@shared_task(name=REPUBLISH_STALLED_COMMANDS, base=ApplicationTask, bind=True, ignore_result=True)
def republish_stalled_commands(self: ApplicationTask) -> int:
    return republish(self.application)
