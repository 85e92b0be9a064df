"""Beat's relay of the events outbox. Task names are a public contract."""

from __future__ import annotations

from celery import shared_task

from application.handlers.events.relay import relay_events
from application.requests.sweeps import RELAY_EVENTS, RelayEvents
from tasks.runtime import SweepTask


@shared_task(name=RELAY_EVENTS, base=SweepTask, bind=True, ignore_result=True)
def relay(self: SweepTask) -> int:
    return relay_events(RelayEvents(), self.application)
