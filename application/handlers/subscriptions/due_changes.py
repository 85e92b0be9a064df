"""Beat's side of plan changes: claims of changes that fell due (and their release when the
apply command could not be published), the apply command for each claim, staged changes
taking effect here (plan and period) once their boundary passes, without calling the
provider again, and the commands that finish withdrawals given up.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

from application.handlers.subscriptions.change_steps import locked_change, record_outcome
from application.requests.sweeps import (
    ClaimDueChanges,
    FindWithdrawalsGivenUp,
    TakeEffectOfStagedChanges,
)
from domain.ports.application import Application, HandlerContext
from domain.ports.repositories import Claim
from domain.provider.rate_budget import sweep_quota
from domain.subscriptions.change_commands import ApplyScheduledChange, FinishStagedWithdrawal
from domain.subscriptions.change_states import ChangeState

logger = logging.getLogger(__name__)


def take_effect_of_staged_changes(sweep: TakeEffectOfStagedChanges, svc: HandlerContext) -> int:
    """Staged changes whose boundary passed take effect here: the subscription moves to the
    new plan and period, and the change is ``applied`` (its lag counted from the boundary).
    No provider call: the provider holds the new price since the change was staged. One
    transaction per batch, each subscription locked before its change (the order every
    request locks them in)."""
    now = svc.clock.now()
    with svc.unit_of_work() as uow:
        due = uow.scheduled_changes.staged_due(now, sweep.batch_size)
        for change_id in due:
            change, subscription = locked_change(uow, change_id)
            if change.state is not ChangeState.STAGED or change.is_withdrawing:
                continue  # a withdrawal, under way or given up, is finished, never applied
            period_end = change.staged_period_end or subscription.current_period_end
            subscription.entered_period(change.target_plan_id, change.effective_at, period_end, now)
            change.applied(now)
            uow.subscriptions.save(subscription)
            uow.scheduled_changes.save(change)
            record_outcome(uow, change, subscription, change.command_id, now)
        uow.commit()
    if due:
        logger.info("%d staged plan changes took effect", len(due))
    return len(due)


def withdrawals_to_finish(
    query: FindWithdrawalsGivenUp, svc: HandlerContext
) -> list[FinishStagedWithdrawal]:
    """A command for each staged change whose withdrawal was given up (its lease ran out):
    its write may have reached the provider, so it may not take effect here blind."""
    with svc.unit_of_work() as uow:
        given_up = uow.scheduled_changes.withdrawals_given_up(svc.clock.now(), query.batch_size)
    return [
        FinishStagedWithdrawal(command_id=change.finish_withdrawal_command_id, change_id=change.id)
        for change in given_up
    ]


def claim_due_changes(sweep: ClaimDueChanges, svc: Application) -> list[Claim]:
    """Take changes that fell due (and those a dead worker left), for beat's sweep; the rest
    wait for the next sweep.

    With an ``apply_rate`` (changes per second the provider's budget allows now), take no more
    than can be applied within ``horizon_seconds``, counting the claimed changes not yet
    applied: the burst is fed to the workers at the provider's pace, and no claim waits in a
    queue until its lease runs out. Without one, take up to ``batch_size``.

    A claim whose commit met a transient error (a switchover, a restart) is tried again for
    :data:`CLAIM_PATIENCE_SECONDS`, at the same instant: a commit that went through but
    whose answer was lost left its changes ``applying`` under a lease that began then, and
    the next try takes them back as its own (``claimed_since``) instead of leaving them to
    wait out their lease with no apply command published (issue 41).
    """
    now = svc.clock.now()
    deadline = time.monotonic() + CLAIM_PATIENCE_SECONDS
    pause = 0.1
    in_doubt = False
    while True:
        try:
            return _claim_due_changes_at(now, sweep, svc, in_doubt=in_doubt)
        except Exception as error:
            if not svc.is_transient(error) or time.monotonic() + pause > deadline:
                raise
            in_doubt = True
            logger.warning(
                "could not claim the due plan changes (%s); trying again in %.1fs",
                type(error).__name__,
                pause,
            )
        time.sleep(pause)
        pause = min(pause * 2, 2.0)


CLAIM_PATIENCE_SECONDS = 20.0
"""How long beat's sweep tries again to claim due changes while the database cannot write
(as a delivery waits to record its command: ``DEFAULT_RECORD_PATIENCE``)."""


def _claim_due_changes_at(
    now: datetime, sweep: ClaimDueChanges, svc: HandlerContext, *, in_doubt: bool
) -> list[Claim]:
    """One try of :func:`claim_due_changes`; ``in_doubt``: an earlier try at ``now`` may
    have committed its claims without hearing so."""
    batch_size, apply_rate = sweep.batch_size, sweep.apply_rate
    lease = svc.billing.change_lease
    with svc.unit_of_work() as uow:
        # Claimed at ``now`` or later: an earlier try's, or a concurrent sweep's (whose apply
        # commands published twice are one command each in the log).
        earlier = uow.scheduled_changes.claimed_since(now, lease, batch_size) if in_doubt else []
        limit = batch_size - len(earlier)
        if apply_rate is not None:
            limit = sweep_quota(
                rate_per_second=apply_rate,
                horizon_seconds=min(sweep.horizon_seconds, lease.total_seconds() / 2),
                in_flight=uow.scheduled_changes.count_in_flight(now),
                batch_size=limit,
            )
        claims = (
            uow.scheduled_changes.claim_due(
                now, now + lease, limit, lead=svc.billing.period_end_lead
            )
            if limit > 0
            else []
        )
        uow.commit()
    return [*earlier, *claims]


def release_claim(claim: Claim, svc: HandlerContext) -> None:
    """The apply command could not be published: let the next sweep take the change."""
    with svc.unit_of_work() as uow:
        uow.scheduled_changes.release(claim, svc.clock.now())
        uow.commit()


def apply_command_for(claim: Claim) -> ApplyScheduledChange:
    """One command per claim: duplicates of a claim's message are one command in the log,
    and a change claimed again (its worker died) gets a command of its own."""
    return ApplyScheduledChange(
        command_id=f"apply:{claim.change_id}:{claim.number}", change_id=claim.change_id
    )
