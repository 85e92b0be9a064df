"""Where the application's messages go: the publisher onto the queues, and the dead letters."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from domain.ports.commands import CommandMessage


@dataclass(frozen=True)
class Published:
    task_name: str
    payload: dict[str, Any]
    command_id: str
    queue: str | None
    priority: int | None


class FakePublisher:
    """Records what would go onto the queues (``domain.ports.commands.CommandPublisher``)."""

    def __init__(self) -> None:
        self.published: list[Published] = []
        self._failures: list[Exception] = []
        self._batch_failures: list[Exception] = []

    def fail_next(self, error: Exception, *, times: int = 1) -> None:
        self._failures.extend([error] * times)

    def publish(self, message: CommandMessage) -> None:
        if self._failures:
            raise self._failures.pop(0)
        self.published.append(
            Published(
                message.type, dict(message.payload), message.id, message.queue, message.priority
            )
        )

    def fail_next_batch(self, error: Exception) -> None:
        """The next batch raises ``error`` at its end, and none of its messages went."""
        self._batch_failures.append(error)

    @contextmanager
    def batch(self) -> Iterator[FakePublisher]:
        staged = FakePublisher()
        staged._failures = self._failures
        yield staged
        if self._batch_failures:
            raise self._batch_failures.pop(0)
        self.published.extend(staged.published)


@dataclass(frozen=True)
class DeadLetter:
    raw: bytes
    queue: str
    reason: str
    task: str | None
    task_id: str | None


class FakeDeadLetters:
    """Keeps refused messages in a list (``domain.ports.commands.DeadLetterStore``)."""

    def __init__(self) -> None:
        self.letters: list[DeadLetter] = []
        self._failures: list[Exception] = []

    def fail_next(self, error: Exception, *, times: int = 1) -> None:
        self._failures.extend([error] * times)

    def add(
        self,
        raw: bytes,
        *,
        queue: str,
        reason: str,
        task: str | None = None,
        task_id: str | None = None,
    ) -> str:
        if self._failures:
            raise self._failures.pop(0)
        self.letters.append(DeadLetter(raw, queue, reason, task, task_id))
        return f"dl_{len(self.letters)}"
