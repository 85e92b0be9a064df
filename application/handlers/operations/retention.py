"""Keeping the command log bounded: finished commands older than their retention are deleted,
a batch at a time (``domain.operations.retention``). Run by beat's sweep and by
``billing-worker commands prune``."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from application.requests.sweeps import CountDueForPruning, PruneCommandLog, PruneOutbox
from domain.messages import CommandStatus
from domain.operations.retention import CommandRetention
from domain.ports.application import Application
from domain.ports.repositories import UnitOfWork
from domain.webhooks import DeliveryState

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pruned:
    """What was (or, in a dry run, would be) deleted of one status."""

    status: CommandStatus
    finished_before: datetime
    count: int


@dataclass(frozen=True)
class PruneReport:
    pruned: list[Pruned]
    complete: bool
    """False when the sweep stopped at its batch budget with candidates left (the next
    sweep goes on)."""
    batches: int
    """Transactions it took (each one batch)."""

    @property
    def total(self) -> int:
        return sum(part.count for part in self.pruned)


class _Rest:
    """A sweep's rests between its batches (``CommandRetention.rest_ratio``): before a batch,
    the rest the previous one earned."""

    def __init__(self, retention: CommandRetention, *, resting: bool) -> None:
        self._retention = retention
        self._resting = resting
        self._owed = 0.0
        self._began = 0.0

    def before_a_batch(self) -> None:
        if self._owed > 0:
            time.sleep(self._owed)
        self._owed = 0.0
        self._began = time.monotonic()

    def after_a_batch(self, deleted: int) -> None:
        # A batch that found nothing did no work worth resting from.
        if self._resting and deleted:
            self._owed = self._retention.rest_after(time.monotonic() - self._began)


def prune_command_log(request: PruneCommandLog, app: Application) -> PruneReport:
    """Delete the finished commands older than their retention, oldest first, in batches of
    the policy's size, each batch its own short transaction. A sweep stops after the
    policy's batch budget and leaves the rest to the next one; ``until_done`` (an operator's
    command, who waits for it) goes on until nothing is due. Commands that have not finished
    are never touched; neither are failed commands within their own, longer retention."""
    retention = app.policy.command_retention
    budget = None if request.until_done else retention.max_batches_per_sweep
    batches = 0
    pruned: list[Pruned] = []
    complete = True
    rest = _Rest(retention, resting=not request.until_done)
    for status, before in retention.cutoffs(app.clock.now()):
        count = 0
        while True:
            if budget is not None and batches >= budget:
                complete = False
                break
            rest.before_a_batch()
            deleted = app.commands.prune_finished(status, before, retention.batch_size)
            rest.after_a_batch(deleted)
            batches += 1
            count += deleted
            if deleted < retention.batch_size:
                break
        pruned.append(Pruned(status, before, count))
        if not complete:
            break
    report = PruneReport(pruned, complete, batches)
    if report.total:
        logger.info(
            "pruned %d finished commands from the command log in %d batches%s: %s",
            report.total,
            batches,
            "" if complete else " (batch budget spent; the next sweep goes on)",
            ", ".join(f"{part.count} {part.status.value}" for part in pruned),
        )
    return report


def due_for_pruning(request: CountDueForPruning, app: Application) -> list[Pruned]:
    """What :func:`prune_command_log` would delete now, deleting nothing (a dry run)."""
    retention = app.policy.command_retention
    return [
        Pruned(status, before, app.commands.count_finished(status, before))
        for status, before in retention.cutoffs(app.clock.now())
    ]


def prune_outbox(sweep: PruneOutbox, app: Application) -> int:
    """Delete what the events outbox no longer needs, a batch per short transaction within
    the policy's batch budget: deliveries as commands (succeeded after the succeeded
    retention, failed ones after the longer failed retention, kept for replay), then the
    published events older than the failed retention that no delivery refers to any more.
    Returns how many rows went."""
    retention = app.policy.command_retention
    now = app.clock.now()
    steps: list[tuple[str, Callable[[UnitOfWork], int]]] = [
        (
            "succeeded deliveries",
            lambda uow: uow.webhook_deliveries.prune_finished(
                DeliveryState.SUCCEEDED, now - retention.succeeded_for, retention.batch_size
            ),
        ),
        (
            "failed deliveries",
            lambda uow: uow.webhook_deliveries.prune_finished(
                DeliveryState.FAILED, now - retention.failed_for, retention.batch_size
            ),
        ),
        (
            "events",
            lambda uow: uow.events.prune_published(
                now - retention.failed_for, retention.batch_size
            ),
        ),
    ]
    batches = total = 0
    rest = _Rest(retention, resting=True)
    for what, prune in steps:
        while batches < retention.max_batches_per_sweep:
            rest.before_a_batch()
            with app.unit_of_work() as uow:
                deleted = prune(uow)
                uow.commit()
            rest.after_a_batch(deleted)
            batches += 1
            total += deleted
            if deleted:
                logger.info("pruned %d %s from the outbox", deleted, what)
            if deleted < retention.batch_size:
                break
    return total
