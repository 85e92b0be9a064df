"""Failed authentications counted per key, in memory: the API's first refusal, before any
hash (``auth.py``, ``verifications.py``, the Stripe webhook route)."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field


@dataclass
class FailureThrottle:
    """Failed authentications per key (a client id, a source address) in a sliding window.

    Checking costs no hash: a key over its limit is refused before any verification, for as
    long as it takes the oldest failure in the window to age out.
    """

    limit: int
    window: float = 60.0
    _failures: dict[str, deque[float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    max_keys: int = 100_000

    def retry_after(self, key: str, now: float | None = None) -> float | None:
        """Seconds until ``key`` may try again, or ``None`` if it may now."""
        now = time.monotonic() if now is None else now
        with self._lock:
            failures = self._failures.get(key)
            if not failures:
                return None
            while failures and failures[0] <= now - self.window:
                failures.popleft()
            if len(failures) < self.limit:
                return None
            return failures[0] + self.window - now

    def failures(self, key: str, now: float | None = None) -> int:
        """How many failures of ``key`` are in the window."""
        now = time.monotonic() if now is None else now
        with self._lock:
            return sum(1 for at in self._failures.get(key, ()) if at > now - self.window)

    def failed(self, key: str, now: float | None = None) -> float:
        """Count a failure of ``key`` (an attempt that failed); its time is returned."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if len(self._failures) >= self.max_keys:
                self._failures.clear()  # a flood of keys forgets all rather than grow
            self._failures.setdefault(key, deque(maxlen=self.limit)).append(now)
        return now
