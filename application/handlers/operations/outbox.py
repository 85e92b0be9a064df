"""The command log as the outbox: a command is recorded, then goes onto its queue.

Every way a command is published takes one of these steps, and each step sends it the one
way there is (``CommandPublisher.publish``, a ``CommandMessage``): the API records a command
and publishes it at once (:func:`accept`); beat's sweep of stalled commands and an
operator's replay or retry publish a recorded command, then mark it so
(:func:`publish_recorded`). A crash in between publishes it again later, which is harmless:
tasks are idempotent by command id. A command the log does not hold yet (a sweep's, an
operator's) is published as ``CommandMessage.of(command)``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from domain.messages import Command, CommandStatus
from domain.ports.commands import (
    CommandIntake,
    CommandJournal,
    CommandMessage,
    CommandPublisher,
    JournalRecord,
    LoggedCommand,
    PublishableCommand,
)

logger = logging.getLogger(__name__)


IN_DOUBT_PATIENCE_SECONDS = 30.0
"""How long the API looks for a command whose record it did not hear of (a switchover's
length, with room)."""


def accept(
    command: Command,
    intake: CommandIntake,
    publisher: CommandPublisher,
    *,
    client_id: str | None,
    idempotency_key: str | None = None,
    request_fingerprint: str | None = None,
) -> LoggedCommand:
    """Record ``command`` (the outbox), then publish it at once; its entry. Raises
    ``DuplicateCommand`` when its id or the client's idempotency key is taken (nothing is
    published then). A publish that fails is logged, not raised: the command is recorded,
    and the stalled-command sweep publishes it later."""
    record = intake.accept(
        command_id=command.command_id,
        command_type=command.TASK_NAME,
        payload=command.model_dump(mode="json"),
        client_id=client_id,
        idempotency_key=idempotency_key,
        request_fingerprint=request_fingerprint,
    )
    try:
        publisher.publish(CommandMessage.recorded(record))
    except Exception:
        logger.warning(
            "publishing command %s failed; the sweep will retry",
            record.id,
            exc_info=True,
            extra={"command_id": record.id, "task": record.type},
        )
    return record


def publish_if_recorded_unheard(
    command_id: str,
    find: Callable[[str], JournalRecord | None],
    publisher: CommandPublisher,
    *,
    is_transient: Callable[[BaseException], bool],
    patience_seconds: float = IN_DOUBT_PATIENCE_SECONDS,
) -> bool:
    """After :func:`accept` met a transient error recording ``command_id``: its commit may
    have gone through with its answer lost (a switchover, a dropped connection), leaving the
    command recorded ``queued`` and never published, and a client that retries with its
    idempotency key is then answered with that record, which nobody publishes until the
    stalled-command sweep. Once the log answers (tried for ``patience_seconds``): the command
    is published if it was recorded and still waits (True); not recorded, nothing is left to
    do (the client's retry records it anew). ``find``: the log's look-up by id."""
    deadline = time.monotonic() + patience_seconds
    pause = 0.1
    while True:
        try:
            record = find(command_id)
            if record is None or record.status is not CommandStatus.QUEUED:
                return False
            publisher.publish(CommandMessage.recorded(record))
        except Exception as error:
            if not is_transient(error) or time.monotonic() + pause > deadline:
                logger.warning(
                    "could not learn whether command %s was recorded; the stalled-command "
                    "sweep publishes it if it was",
                    command_id,
                    exc_info=True,
                    extra={"command_id": command_id},
                )
                return False
            time.sleep(pause)
            pause = min(pause * 2, 2.0)
            continue
        logger.warning(
            "command %s was recorded by a commit whose answer was lost; published it",
            command_id,
            extra={"command_id": command_id, "task": record.type},
        )
        return True


def publish_recorded(
    record: PublishableCommand,
    publisher: CommandPublisher,
    journal: CommandJournal,
    *,
    retries: int = 0,
) -> None:
    """Publish ``record`` as its task (the task id is the command id), then mark it
    published; raises, leaving it unmarked for the sweep, if the message could not go.
    ``retries``: the deliveries it used up already (``domain.ports.commands.retries_used``)."""
    publisher.publish(CommandMessage.recorded(record, retries=retries))
    journal.mark_published(record.id)
