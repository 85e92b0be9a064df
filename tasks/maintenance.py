"""Periodic housekeeping run by celery beat."""

from __future__ import annotations

import logging
from datetime import timedelta

from worker.bootstrap import services
from worker.celery_app import app
from worker.dispatch import publish

logger = logging.getLogger(__name__)


@app.task(name="maintenance.republish_stalled_commands", ignore_result=True)
def republish_stalled_commands() -> int:
    """Publish again what the API recorded but no worker started: the publish failed (Redis
    was down) or the message was lost with a Redis that kept no data. Tasks are idempotent
    by command id, so a duplicate is harmless."""
    svc = services()
    stalled = svc.commands.stalled(timedelta(seconds=svc.settings.stalled_command_seconds))
    for record in stalled:
        publish(app, record)
        svc.commands.mark_published(record.id)
    if stalled:
        logger.warning("republished %d stalled commands", len(stalled))
    return len(stalled)
