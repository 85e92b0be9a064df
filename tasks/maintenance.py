"""Periodic housekeeping run by celery beat. Task names are a public contract."""

from __future__ import annotations

from celery import shared_task

from application.handlers.operations.retention import prune_command_log as prune
from application.handlers.operations.retention import prune_outbox
from application.handlers.operations.sweeps import republish_stalled_commands as republish
from application.requests.sweeps import (
    PRUNE_COMMAND_LOG,
    REPUBLISH_STALLED_COMMANDS,
    PruneCommandLog,
    PruneOutbox,
    RepublishStalledCommands,
)
from tasks.runtime import SweepTask


@shared_task(name=REPUBLISH_STALLED_COMMANDS, base=SweepTask, bind=True, ignore_result=True)
def republish_stalled_commands(self: SweepTask) -> int:
    return republish(RepublishStalledCommands(), self.application)


@shared_task(name=PRUNE_COMMAND_LOG, base=SweepTask, bind=True, ignore_result=True)
def prune_command_log(self: SweepTask) -> int:
    application = self.application
    return prune(PruneCommandLog(), application).total + prune_outbox(PruneOutbox(), application)
