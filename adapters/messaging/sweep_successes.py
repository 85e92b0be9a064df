"""When each of beat's sweeps last succeeded, kept in Redis for every process to read.

The metric ``billing_sweep_last_success_timestamp_seconds`` lives in each worker node's
exporter, out of the API's reach; the console's home page reads this instead. A worker writes
one hash field when a sweep's run succeeds (a round trip per run, a few a second at most);
the value is the worker's wall clock, as the metric's is, and never the application's clock
(which ``clock advance`` shifts on the local stack): beat runs the sweeps on real time, so
their health is judged on real time (``worker/api/console/home.py``).
"""

from __future__ import annotations

from datetime import UTC, datetime

import redis

KEY = "billing:sweeps:last_success"


class SweepSuccesses:
    def __init__(self, client: redis.Redis) -> None:
        self._client = client

    def record(self, sweep: str, at: float) -> None:
        """``sweep`` succeeded at Unix time ``at``."""
        self._client.hset(KEY, sweep, repr(at))

    def read(self) -> dict[str, datetime]:
        """Each sweep that succeeded since Redis's data was kept, and when it last did."""
        stored = self._client.hgetall(KEY)
        return {
            (name.decode() if isinstance(name, bytes) else str(name)): datetime.fromtimestamp(
                float(value), UTC
            )
            for name, value in stored.items()
        }
