"""An operator's replay of a dead letter (``billing-worker dead-letters replay``, the
console's action): its message back on its queue, if a worker can take it now."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

import redis

from adapters.messaging.broker import Rejected, check_envelope
from adapters.messaging.dead_letters import DeadLetter, DeadLetters
from domain.errors import FailedPrecondition, NotFound, error_info

if TYPE_CHECKING:
    from celery import Celery


def worker_task_names(app: Celery) -> frozenset[str]:
    """The tasks the workers run: those the workers' task modules register (this code's, as
    a worker of the same release loads them) on ``app``, Celery's own left out. Read through
    the calling process's publishing app: an operator's process never builds the workers'."""
    from adapters.messaging.config import TASK_MODULES

    for module in TASK_MODULES:
        importlib.import_module(module)
    return frozenset(name for name in app.tasks if not name.startswith("celery."))


def replay_dead_letter(
    store: DeadLetters, client: redis.Redis, letter_id: str, task_names: frozenset[str]
) -> DeadLetter:
    """Put the letter's message back on its queue, if a worker can take it now (say, its
    task was unknown to the workers of the day; ``task_names``: the tasks they run), then
    drop the letter. ``NotFound`` without it; ``FailedPrecondition`` saying why when it
    still cannot be taken."""
    letter = store.get(letter_id)
    if letter is None:
        raise NotFound.resource("dead_letter", letter_id)
    if letter.truncated:
        raise _refused(letter_id, f"dead letter {letter_id} was kept truncated: cannot replay")
    try:
        check_envelope(letter.raw)
    except Rejected as why:
        raise _refused(letter_id, f"dead letter {letter_id} still cannot be taken: {why}") from None
    if letter.task not in task_names:
        # Replayed, it would only come back as a new dead letter under a new id.
        raise _refused(
            letter_id,
            f"dead letter {letter_id} is of task {letter.task!r}, which no worker runs: "
            "not replayed (drop it, or replay it once a worker runs that task)",
        )
    client.lpush(letter.queue, letter.raw)
    store.drop(letter_id)
    return letter


def _refused(letter_id: str, message: str) -> FailedPrecondition:
    return FailedPrecondition(
        message, details=[error_info("DEAD_LETTER_NOT_REPLAYABLE", letter_id=letter_id)]
    )
