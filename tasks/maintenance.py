"""Periodic housekeeping run by celery beat. Task names are a public contract."""

from __future__ import annotations

from celery import shared_task

from application.handlers.retention import prune_command_log as prune
from application.handlers.retention import prune_outbox
from application.handlers.sweeps import republish_stalled_commands as republish
from application.requests.sweeps import PruneCommandLog, PruneOutbox, RepublishStalledCommands
from tasks.runtime import SweepTask

REPUBLISH_STALLED_COMMANDS = "maintenance.republish_stalled_commands"
PRUNE_COMMAND_LOG = "maintenance.prune_command_log"
"""Beat's sweep of finished commands older than their retention (a batch budget per run),
and of the outbox's deliveries and events (the same retention)."""


@shared_task(name=REPUBLISH_STALLED_COMMANDS, base=SweepTask, bind=True, ignore_result=True)
def republish_stalled_commands(self: SweepTask) -> int:
    return republish(RepublishStalledCommands(), self.application)


@shared_task(name=PRUNE_COMMAND_LOG, base=SweepTask, bind=True, ignore_result=True)
def prune_command_log(self: SweepTask) -> int:
    application = self.application
    return prune(PruneCommandLog(), application).total + prune_outbox(PruneOutbox(), application)
