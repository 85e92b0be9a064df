"""The dead-letter store: messages a worker could not take from a queue, kept for operators.

A capped Redis stream on the broker (``billing:dead-letters``), written by the worker as it
refuses a message (see :mod:`adapters.messaging.broker`): the raw bytes (truncated), the queue, the
reason and the time, plus the task name and id when the message names them. Redis rather
than the database, so that a message is recorded even when the database is down, and by the
process that holds the broker connection anyway. Kept with the broker's persistence (AOF).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import redis

STREAM = "billing:dead-letters"
TOTAL = "billing:dead-letters:total"
MAX_LETTERS = 10_000
"""The newest letters kept (older ones go first)."""
MAX_RAW_BYTES = 64 * 1024
"""Raw bytes kept of one message."""


@dataclass(frozen=True)
class DeadLetter:
    id: str
    at: datetime
    queue: str
    reason: str
    task: str
    task_id: str
    size: int
    raw: bytes
    """The message as it sat in Redis, cut to :data:`MAX_RAW_BYTES`."""

    @property
    def truncated(self) -> bool:
        return len(self.raw) < self.size

    def to_view(self, *, with_raw: bool = False) -> dict[str, Any]:
        view: dict[str, Any] = {
            "id": self.id,
            "at": self.at.isoformat(),
            "queue": self.queue,
            "reason": self.reason,
            "task": self.task,
            "task_id": self.task_id,
            "size": self.size,
            "truncated": self.truncated,
        }
        if with_raw:
            view["raw"] = self.raw.decode("utf-8", errors="backslashreplace")
        return view


def _named(raw: bytes) -> tuple[str, str]:
    """The task name and id a raw message gives, if it is JSON enough to give them."""
    try:
        envelope = json.loads(raw)
        headers = envelope.get("headers") or {}
        return str(headers.get("task") or ""), str(headers.get("id") or "")
    except Exception:
        return "", ""


class DeadLetters:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def _now(self) -> datetime:
        # The application's clock (shifted on a local stack), read over the broker's own
        # connection: a letter's time sits beside the commands' times.
        from adapters.clock import shifted_now
        from worker.settings import get_settings

        return shifted_now(self._redis, get_settings().resolved_shiftable_clock())

    def add(
        self,
        raw: bytes,
        *,
        queue: str,
        reason: str,
        task: str | None = None,
        task_id: str | None = None,
    ) -> str:
        """Keep ``raw`` with why it was refused; the task name and id are read from the
        message when not given."""
        named_task, named_id = _named(raw[:MAX_RAW_BYTES])
        task, task_id = task or named_task, task_id or named_id
        fields: dict[Any, Any] = {
            "at": self._now().isoformat(),
            "queue": queue,
            "reason": reason[:2000],
            "task": task[:200],
            "task_id": task_id[:200],
            "size": len(raw),
            "raw": raw[:MAX_RAW_BYTES],
        }
        pipe = self._redis.pipeline(transaction=False)
        pipe.xadd(STREAM, fields, maxlen=MAX_LETTERS, approximate=True)
        pipe.incr(TOTAL)
        letter_id = pipe.execute()[0]
        return letter_id.decode() if isinstance(letter_id, bytes) else str(letter_id)

    def list(self, limit: int = 50) -> list[DeadLetter]:
        """The newest first."""
        entries = cast(list[Any], self._redis.xrevrange(STREAM, count=limit))
        return [_letter(entry_id, fields) for entry_id, fields in entries]

    def get(self, letter_id: str) -> DeadLetter | None:
        try:
            entries = cast(list[Any], self._redis.xrange(STREAM, letter_id, letter_id))
        except redis.ResponseError:  # not a stream id at all
            return None
        return _letter(*entries[0]) if entries else None

    def drop(self, letter_id: str) -> bool:
        try:
            return bool(self._redis.xdel(STREAM, letter_id))
        except redis.ResponseError:
            return False

    def count(self) -> int:
        """Letters kept now."""
        return int(cast(Any, self._redis.xlen(STREAM)))

    def total(self) -> int:
        """Letters ever recorded (also those dropped since)."""
        return int(cast(Any, self._redis.get(TOTAL)) or 0)


def _text(fields: dict[bytes, bytes], name: str) -> str:
    return fields.get(name.encode(), b"").decode("utf-8", errors="replace")


def _letter(entry_id: bytes | str, fields: dict[bytes, bytes]) -> DeadLetter:
    return DeadLetter(
        id=entry_id.decode() if isinstance(entry_id, bytes) else entry_id,
        at=datetime.fromisoformat(_text(fields, "at")),
        queue=_text(fields, "queue"),
        reason=_text(fields, "reason"),
        task=_text(fields, "task"),
        task_id=_text(fields, "task_id"),
        size=int(_text(fields, "size") or 0),
        raw=fields.get(b"raw", b""),
    )
