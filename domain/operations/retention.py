"""How long the command log keeps finished commands.

The log is also the store of idempotency keys and of the outcomes a redelivered message
replays, so only commands that finished long ago go: a succeeded command after
``succeeded_for``, a failed one after ``failed_for`` (longer, so that operators can still see
and replay it), a rejected one after ``rejected_for`` (shorter: it was the caller's mistake,
its caller was answered, and nobody replays it). A command that has not finished (queued,
running, retrying, waiting) is never pruned, however old. Replaying a failed command makes it
queued again: it is kept until its new run finishes, and its age counts from then.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from domain.messages import CommandStatus

PRUNABLE_STATUSES = (CommandStatus.SUCCEEDED, CommandStatus.FAILED, CommandStatus.REJECTED)
"""The only statuses a command is ever pruned in: the finished ones."""


@dataclass(frozen=True)
class CommandRetention:
    """What the command log keeps, and how much one sweep may delete."""

    succeeded_for: timedelta
    failed_for: timedelta
    batch_size: int
    """Commands deleted by one transaction: each batch holds its locks only briefly."""
    max_batches_per_sweep: int
    """A sweep stops after this many batches and leaves the rest to the next one."""
    rejected_for: timedelta = timedelta(days=7)
    """How long a rejected command (the caller's mistake) is kept after it finished."""
    rest_ratio: float = 0.0
    """After each batch that deleted, beat's sweep rests this many times the batch's own
    time: its deletes then take at most ``1 / (1 + rest_ratio)`` of the database while they
    last, and the commands coming in keep their pace (an operator's prune, who waits for it,
    does not rest)."""

    def rest_after(self, batch_seconds: float) -> float:
        """Seconds to rest after a batch that took ``batch_seconds``."""
        return max(0.0, batch_seconds * self.rest_ratio)

    def cutoffs(self, now: datetime) -> list[tuple[CommandStatus, datetime]]:
        """Each prunable status, with the time before which a command that finished in it
        goes."""
        return [
            (CommandStatus.SUCCEEDED, now - self.succeeded_for),
            (CommandStatus.FAILED, now - self.failed_for),
            (CommandStatus.REJECTED, now - self.rejected_for),
        ]
