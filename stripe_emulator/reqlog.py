"""The request log tests read through the admin API (``GET /_emulator/requests``).

One entry per request to the Stripe API (``/v1/...``), in arrival order, holding what a test
needs to count calls and retries: method, path, parsed query and form parameters, idempotency
key, status, the fault applied (if any), whether the answer was an idempotent replay, and the
time (wall clock and emulator clock) and duration. The log is bounded (oldest entries drop).
"""

from __future__ import annotations

from collections import deque
from typing import Any

LogEntry = dict[str, Any]


class RequestLog:
    def __init__(self, max_entries: int) -> None:
        self._entries: deque[LogEntry] = deque(maxlen=max_entries)

    def append(self, entry: LogEntry) -> None:
        self._entries.append(entry)

    def clear(self) -> None:
        self._entries.clear()

    def select(self, path_prefix: str | None = None, method: str | None = None) -> list[LogEntry]:
        wanted_method = method.upper() if method else None
        return [
            entry
            for entry in self._entries
            if (path_prefix is None or entry["path"].startswith(path_prefix))
            and (wanted_method is None or entry["method"] == wanted_method)
        ]
