"""Flower as ``billing-worker flower`` runs it tells a caller's mistake from a failure: a
rejected command's task shows ``REJECTED`` and stays out of the "Failed" counts; a failed one
is ``FAILURE`` as before. Fed the task events a worker sends, into Flower's own event state."""

from __future__ import annotations

import time
import uuid
from typing import Any

from flower.events import EventsState

from worker.launch.flower import show_rejections_apart

WORKER = "worker@test"


def ended(state: EventsState, exception: str) -> str:
    """A task received, started and failed with ``exception`` (its repr); its id."""
    task_id = str(uuid.uuid4())
    now = time.time()
    common: dict[str, Any] = {
        "uuid": task_id,
        "hostname": WORKER,
        "clock": 1,
        "local_received": now,
    }
    state.event({**common, "type": "task-received", "timestamp": now, "name": "users.enable"})
    state.event({**common, "type": "task-started", "timestamp": now + 0.1})
    state.event(
        {
            **common,
            "type": "task-failed",
            "timestamp": now + 0.2,
            "exception": exception,
            "traceback": None,
        }
    )
    return task_id


def test_a_rejection_shows_rejected_and_only_a_failure_counts_as_failed() -> None:
    show_rejections_apart()
    state = EventsState()

    rejected = ended(state, "CommandRejected(NOT_FOUND (5): user 'usr_x' not found)")
    failed = ended(state, "CommandFailed(UNAVAILABLE (14) RETRY_BUDGET_EXHAUSTED: gave up)")

    assert state.tasks[rejected].state == "REJECTED"
    assert state.tasks[rejected].exception.startswith("CommandRejected(NOT_FOUND (5)")
    assert state.tasks[failed].state == "FAILURE"
    assert state.counter[WORKER]["task-failed"] == 1
    assert state.counter[WORKER]["task-rejected"] == 1
    assert state.search_engine.search(state.tasks, state="REJECTED").task_ids == [rejected]
    assert state.search_engine.search(state.tasks, state="FAILURE").task_ids == [failed]
