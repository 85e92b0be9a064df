"""Beat's watch of the broker's primary: a thread of beat's process runs the failover sweep
(``application/handlers/operations/failover.py``) every beat interval, beside beat's schedule.

Not a task on the queue like the other sweeps: after a failover the queues hold what
accumulated while the workers reconnected, and a sweep message waits its turn behind it (tens
of seconds under a period-end burst), while the commands the failover dropped wait for it.
Beat reconnects within seconds of the promotion and publishes all along, so the commands go
out again within a few seconds of the new primary taking over. Two beats each run one: both
may see the same failover and republish the same commands, which run once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from application.handlers.operations.failover import recover_from_failover
from application.requests.sweeps import RecoverFromFailover
from domain.ports.application import FailoverContext

logger = logging.getLogger(__name__)


def watch_in_background(
    application: Callable[[], FailoverContext],
    interval_seconds: float,
    heartbeat: Callable[[], None] = lambda: None,
) -> threading.Thread:
    """Start the watch (a daemon thread: it ends with the process); the thread.
    ``heartbeat`` is called after each look that ended (``adapters/messaging/heartbeats.py``)."""

    def watch() -> None:
        while True:
            try:
                recover_from_failover(RecoverFromFailover(), application())
            except Exception as error:  # Redis or the database away: the next look tries again
                logger.info("could not look at the broker's primary (%s)", error)
            else:
                heartbeat()
            stop.wait(interval_seconds)

    stop = threading.Event()
    thread = threading.Thread(target=watch, name="failover-watch", daemon=True)
    thread.start()
    return thread
