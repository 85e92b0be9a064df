"""Beat's sweeps, as application handlers: what fell due or was lost is published again."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from application.handlers.operations.outbox import publish_recorded
from application.handlers.subscriptions.due_changes import (
    apply_command_for,
    claim_due_changes,
    release_claim,
    take_effect_of_staged_changes,
    withdrawals_to_finish,
)
from application.requests.sweeps import (
    ClaimDueChanges,
    FindWithdrawalsGivenUp,
    PublishDueChanges,
    RedrivePendingAccounts,
    RepublishStalledCommands,
    TakeEffectOfStagedChanges,
)
from domain.billing.registration_redrive import redrive_registration
from domain.messages import Command
from domain.ports.application import Application
from domain.ports.commands import CommandMessage, retries_used
from domain.ports.repositories import Claim
from domain.provider.rate_budget import CallKind

logger = logging.getLogger(__name__)

SWEEP_SLACK_SECONDS = 3.0
"""Work claimed beyond the next sweeps, for a sweep that runs late."""

BULK_MESSAGE_PRIORITY = 6
"""Message priority of bulk commands. Redis keeps one list per priority step of a queue and
a worker takes every queue's 0 list first, so interactive commands (published without a
priority) never wait behind a period-end burst of due changes."""

STRIPE_SYNC_MESSAGE_PRIORITY = 9
"""Message priority of the syncs Stripe's events ask for (``stripe.sync_object``), below bulk:
an event reports work done, and its sync only re-reads what Stripe holds, so a storm of them
(3 or 4 per renewal, all at the boundary) never holds back the due changes or an interactive
command; they run when the workers have nothing else to do. The route of the task sets it
(``adapters/messaging/config.py``), so that every publisher of the command gets it."""


@dataclass(frozen=True)
class DueChangesPublished:
    """What one run of the due-changes sweep did: ``claimed`` changes, ``published`` apply
    commands for them, and ``more`` when its time ran out with more maybe due and the
    sweep's batch not yet claimed, so that the next run should come now rather than at
    beat's next tick."""

    claimed: int
    published: int
    more: bool = False


def publish_due_changes(sweep: PublishDueChanges, app: Application) -> DueChangesPublished:
    """Claim the plan changes that fell due, with a lease, and publish one apply command for
    each, a chunk at a time, until nothing due is left or the run's time box is spent. Any
    number of sweeps may run at once: a change is claimed by one sweep, and claimed again
    only once its lease ran out."""
    policy = app.policy
    stop_at = time.monotonic() + policy.due_changes_run_seconds
    # Staged changes whose boundary passed take effect first: no provider call, a few
    # statements per batch.
    staged = TakeEffectOfStagedChanges(batch_size=policy.due_changes_batch_size)
    while take_effect_of_staged_changes(staged, app) == staged.batch_size:
        if time.monotonic() >= stop_at:
            return DueChangesPublished(0, 0, more=True)
    given_up = FindWithdrawalsGivenUp(batch_size=policy.due_changes_batch_size)
    _publish_bulk(withdrawals_to_finish(given_up, app), app)
    budget = app.rate_budget()
    # Read once a run (a call to Redis): the rate does not move within its few milliseconds.
    apply_rate = budget.effective_rate(CallKind.WRITE) if budget.enabled else None
    claimed = published = 0
    allowed = policy.due_changes_batch_size - sweep.claimed_before
    more = False
    while claimed < allowed:
        chunk = min(sweep.chunk_size, allowed - claimed)
        claims = claim_due_changes(
            ClaimDueChanges(
                batch_size=chunk,
                # One provider call applies a change; feed the workers what the budget can
                # apply before the sweep after next (and a late sweep), so they never idle and
                # no claim waits out its lease.
                apply_rate=apply_rate,
                horizon_seconds=2 * policy.due_changes_interval_seconds + SWEEP_SLACK_SECONDS,
            ),
            app,
        )
        claimed += len(claims)
        published += _publish_claims(claims, app)
        if len(claims) < chunk:
            break  # nothing more is due, or the budget's horizon is full
        if time.monotonic() >= stop_at:
            more = claimed < allowed  # a full last chunk: more may be due
            break
    if claimed:
        logger.info(
            "claimed %d due plan changes, published %d%s",
            claimed,
            published,
            "; the next run takes the rest" if more else "",
        )
    return DueChangesPublished(claimed, published, more=more)


def _publish_bulk(commands: Sequence[Command], app: Application) -> None:
    """Publish bulk commands that a later sweep finds again if they do not go."""
    for command in commands:
        try:
            app.publisher().publish(
                CommandMessage.of(command, priority=BULK_MESSAGE_PRIORITY, result_kept=False)
            )
        except Exception:
            logger.warning(
                "could not publish %s; the next sweep tries again",
                command.command_id,
                exc_info=True,
                extra={"command_id": command.command_id},
            )


def _publish_claims(claims: list[Claim], app: Application) -> int:
    """Publish an apply command for each claim, in one batch; a claim whose command could not
    go is released for the next sweep. Returns how many went."""
    if not claims:
        return 0
    batched: list[Claim] = []
    try:
        with app.publisher().batch() as publisher:
            for claim in claims:
                command = apply_command_for(claim)
                try:
                    # Behind interactive commands on the same queue (Redis serves 0 first);
                    # nobody waits on its result (storing it cost a run 2 % of its CPU).
                    publisher.publish(
                        CommandMessage.of(
                            command, priority=BULK_MESSAGE_PRIORITY, result_kept=False
                        )
                    )
                except Exception:
                    logger.warning(
                        "could not publish %s; releasing it",
                        command.command_id,
                        exc_info=True,
                        extra={"command_id": command.command_id, "change_id": claim.change_id},
                    )
                    release_claim(claim, app)
                    continue
                batched.append(claim)
    except Exception:
        # Any of them may have gone: claimed and published again, each applies once.
        logger.warning(
            "could not publish %d claimed plan changes; releasing them", len(batched), exc_info=True
        )
        for claim in batched:
            release_claim(claim, app)
        batched.clear()
    return len(batched)


def republish_stalled_commands(sweep: RepublishStalledCommands, app: Application) -> int:
    """Publish again what the API recorded but no worker started: the publish failed (Redis
    was down) or the message was lost with a Redis that kept no data; and a command still
    running long after a dead worker's message would have come back (its message lost
    between the queue and the broker's record of it). Tasks are idempotent by command id, so
    a duplicate is harmless: it replays the outcome, or takes over a run whose lease ended."""
    policy = app.policy
    stalled = app.commands.stalled(
        policy.stalled_after, running_older_than=policy.running_given_up_after
    )
    publisher = app.publisher()
    for record in stalled:
        publish_recorded(record, publisher, app.commands, retries=retries_used(record))
    if stalled:
        logger.warning("republished %d stalled commands", len(stalled))
    return len(stalled)


REDRIVE_BATCH_SIZE = 1000
"""The most stuck accounts one re-drive sweep publishes (the oldest first)."""


def redrive_pending_accounts(sweep: RedrivePendingAccounts, app: Application) -> int:
    """Send the registration of every account ``pending`` for longer than the policy's
    ``pending_account_redrive_after`` again (a registration that exhausted its retries, or whose
    message was lost, stays pending until then); returns how many were published. Each attempt's
    command id is derived from the account and the attempt
    (:func:`domain.billing.registration_redrive.redrive_registration`), so sweeps that send one
    attempt twice run it once, and a registration is idempotent in any case (its key is
    stored)."""
    now = app.clock.now()
    after = app.policy.pending_account_redrive_after
    with app.unit_of_work() as uow:
        stuck = uow.billing_accounts.pending_created_before(now - after, REDRIVE_BATCH_SIZE)
    publisher = app.publisher()
    published = 0
    for account in stuck:
        command = redrive_registration(account, now, after)
        if command is None:
            continue
        try:
            publisher.publish(CommandMessage.of(command, priority=BULK_MESSAGE_PRIORITY))
        except Exception:
            logger.warning(
                "could not publish %s; the next sweep sends it",
                command.command_id,
                exc_info=True,
                extra={"command_id": command.command_id, "billing_account_id": account.id},
            )
            continue
        published += 1
    if stuck:
        logger.warning(
            "sent the registration of %d billing accounts pending for over %ds again",
            published,
            after.total_seconds(),
        )
    return published
