"""Periodic housekeeping run by celery beat. Task names are a public contract."""

from __future__ import annotations

from celery import shared_task

from application.handlers.operations.retention import prune_command_log as prune
from application.handlers.operations.retention import prune_outbox
from application.handlers.operations.sweeps import republish_stalled_commands as republish
from application.requests.sweeps import (
    CONSUMER_HEARTBEAT,
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


@shared_task(name=CONSUMER_HEARTBEAT, ignore_result=True, send_events=False)
def consumer_heartbeat(loop: str, every: float) -> None:
    """A worker node's heartbeat came back through its own queue and a pool process ran it.

    Nothing to do here: its run is recorded as ``loop``'s heartbeat by the worker's signals
    (``adapters/observability/signals.py``), as a sweep's success is. It sends no task events
    (not in Flower, every few seconds on every node)."""
