"""``up``'s supervision of its children: a process that exits while the stack runs is started
again, as a supervisor (systemd, Kubernetes, compose's ``restart:``) does in a deployment,
instead of the whole stack stopping with it.

One process exiting is no reason to stop the others: the API still accepts commands (it
records them first, and beat publishes what Redis did not take), a worker's unacknowledged
messages go back to the queue when it is gone, and the restarted process picks up where it
was. A child that keeps exiting is started again after a growing pause
(:data:`FIRST_BACKOFF_SECONDS`, doubling up to :data:`MOST_BACKOFF_SECONDS`), so that a
process that cannot start does not spin; one that ran :data:`STABLE_AFTER_SECONDS` before
exiting starts over from the first pause. Each exit and restart is a line on ``up``'s
terminal with the count of restarts, the exit code and the child's log.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from worker.local.embedded import Child, ProcessGroup

FIRST_BACKOFF_SECONDS = 1.0
MOST_BACKOFF_SECONDS = 30.0
STABLE_AFTER_SECONDS = 60.0
"""A child that ran this long before it exited is started again after the first pause."""


@dataclass
class Supervisor:
    """Looks after a :class:`~worker.local.embedded.ProcessGroup`: :meth:`tend` once per look."""

    group: ProcessGroup
    logs: Path
    say: Callable[[str], None]
    _due: dict[int, float] = field(default_factory=dict)
    """An exited child (by ``id``) → when it is started again (``time.monotonic()``)."""
    _in_a_row: dict[int, int] = field(default_factory=dict)
    """A child (by ``id``) → its exits since it last ran :data:`STABLE_AFTER_SECONDS`."""

    def tend(self, now: float | None = None) -> None:
        """Note the children that exited since the last look, and start again those whose
        pause is over."""
        now = time.monotonic() if now is None else now
        for child in self.group.children:
            code = child.process.poll()
            if code is None:
                continue
            key = id(child)
            if key not in self._due:
                self._due[key] = now + self._backoff(child, now)
                self.say(
                    f"{child.name} (pid {child.process.pid}) exited with {code}; starting it "
                    f"again in {self._due[key] - now:.0f}s (restarts so far: {child.restarts}); "
                    f"see {self._log(child)}"
                )
            elif now >= self._due[key]:
                del self._due[key]
                process = self.group.restart(child)
                self.say(
                    f"{child.name} started again (pid {process.pid}, restart {child.restarts})"
                )

    def _backoff(self, child: Child, now: float) -> float:
        key = id(child)
        ran = now - child.started_at
        in_a_row = 1 if ran >= STABLE_AFTER_SECONDS else self._in_a_row.get(key, 0) + 1
        self._in_a_row[key] = in_a_row
        return min(FIRST_BACKOFF_SECONDS * 2.0 ** (in_a_row - 1), MOST_BACKOFF_SECONDS)

    def _log(self, child: Child) -> Path:
        return child.log_path or self.logs / f"{child.name}.log"
