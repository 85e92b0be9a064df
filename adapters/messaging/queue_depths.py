"""How many messages wait in each of our queues, read straight from the Redis broker."""

from __future__ import annotations

from collections.abc import Sequence

import redis

PRIORITY_SEPARATOR = "\x06\x16"
"""How kombu's Redis transport names a queue's list for a priority step other than 0."""


def queue_lists(queue: str, priority_steps: Sequence[int]) -> list[str]:
    """The Redis lists holding ``queue``'s messages, one per priority step."""
    return [queue if step == 0 else f"{queue}{PRIORITY_SEPARATOR}{step}" for step in priority_steps]


class QueueDepths:
    """Reads every queue's depth (all its priority lists added up) in one round trip."""

    def __init__(
        self, client: redis.Redis, queues: Sequence[str], priority_steps: Sequence[int]
    ) -> None:
        self._client = client
        self._queues = tuple(queues)
        self._steps = tuple(priority_steps) or (0,)

    def __call__(self) -> dict[str, int]:
        pipe = self._client.pipeline(transaction=False)
        for queue in self._queues:
            for name in queue_lists(queue, self._steps):
                pipe.llen(name)
        lengths = iter(pipe.execute())
        return {queue: sum(int(next(lengths)) for _ in self._steps) for queue in self._queues}
