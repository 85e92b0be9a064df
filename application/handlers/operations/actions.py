"""The operator console's actions and its subscription story (``billing-worker accounts``,
``subscriptions``, ``commands``; ``/v1beta1/operations``).

Each action is one handler ``(command, ctx)``: it decides in a unit of work, writes its
event to the outbox in that transaction, and only after the commit puts what it sets going
on the queue (a crash in between leaves the event and no message: beat's re-drive and
stalled-command sweeps still send what is due, and the action can be taken again).
"""

from __future__ import annotations

import logging
from typing import Any

from application.handlers.operations.outbox import publish_recorded
from application.requests.operator_actions import (
    ActionTaken,
    MarkAccountOffline,
    ReplayCommands,
    ReplayDeadLetter,
    RetryCommand,
    RetryRegistration,
    ShowSubscription,
    SkipScheduledChange,
)
from domain.billing.account_commands import RegisterBillingAccount
from domain.errors import CommandError, FailedPrecondition, NotFound, error_info, found
from domain.events.billing_accounts import (
    BillingAccountMarkedOffline,
    BillingAccountRegistrationRetried,
)
from domain.events.commands import CommandRetryRequested
from domain.events.subscriptions import PlanChangeSkipped
from domain.messages import AWAITING_DELIVERY, CommandStatus
from domain.operations.console import SubscriptionStory
from domain.operations.outcomes import not_replayable
from domain.ports.application import CommandLogContext, HandlerContext, OperatorContext
from domain.ports.commands import CommandMessage
from domain.provider.rate_budget import Priority, calls_at
from domain.subscriptions.change_states import ChangeReason, ChangeState

logger = logging.getLogger(__name__)

INVOICES_SHOWN = 20


def retry_registration(command: RetryRegistration, ctx: CommandLogContext) -> ActionTaken:
    """Send a ``pending`` account's registration now, as the command ``command.command_id``
    (the account's stored idempotency key makes it one customer however often it runs)."""
    with ctx.unit_of_work() as uow:
        account = found(
            uow.billing_accounts.get(command.billing_account_id, for_update=True),
            "billing_account",
            command.billing_account_id,
        )
        account.ensure_registration_pending()
        uow.events.add(
            BillingAccountRegistrationRetried.of(
                account, command_id=command.command_id, now=ctx.clock.now()
            )
        )
        uow.commit()
    register = RegisterBillingAccount(
        command_id=command.command_id, org_id=account.org_id, billing_account_id=account.id
    )
    ctx.publisher().publish(CommandMessage.of(register))
    logger.info("operator retried the registration of %s", account.id)
    return ActionTaken(
        action="retry_registration",
        command_id=command.command_id,
        subject=f"billing_account:{account.id}",
        state=account.state.value,
        changed=True,
        sent_command_id=register.command_id,
    )


def mark_account_offline(command: MarkAccountOffline, ctx: HandlerContext) -> ActionTaken:
    """Make a ``pending`` account ``active`` without the provider. A registration still
    retrying registers it all the same when it gets through (``register`` is what an
    offline account takes): mark it offline once its command has failed."""
    with ctx.unit_of_work() as uow:
        account = found(
            uow.billing_accounts.get(command.billing_account_id, for_update=True),
            "billing_account",
            command.billing_account_id,
        )
        now = ctx.clock.now()
        changed = account.mark_offline(now)
        if changed:
            uow.billing_accounts.save(account)
            uow.events.add(
                BillingAccountMarkedOffline.of(account, command_id=command.command_id, now=now)
            )
            uow.commit()
    return ActionTaken(
        action="mark_offline",
        command_id=command.command_id,
        subject=f"billing_account:{account.id}",
        state=account.state.value,
        changed=changed,
    )


def retry_command(command: RetryCommand, ctx: CommandLogContext) -> ActionTaken:
    """Send a ``retrying``, ``waiting`` or ``queued`` command again now, under its own id.
    The delivery already waiting for its turn finds it finished (or running) when it comes,
    and does nothing twice. A failed command is replayed (``commands replay``) instead."""
    target = command.target_command_id
    record = ctx.commands.get(target)
    if record is None:
        raise NotFound.resource("command", target)
    if record.status not in AWAITING_DELIVERY:
        hint = "; replay it instead" if record.status is CommandStatus.FAILED else ""
        raise FailedPrecondition(
            f"command {target!r} is {record.status.value}: only a queued, retrying or waiting "
            f"command is retried now{hint}",
            details=[error_info("COMMAND_NOT_WAITING", command_id=target)],
        )
    with ctx.unit_of_work() as uow:
        uow.events.add(
            CommandRetryRequested.of(
                target, record.type, record.status.value, by=command.command_id, now=ctx.clock.now()
            )
        )
        uow.commit()
    publish_recorded(record, ctx.publisher(), ctx.commands)
    return ActionTaken(
        action="retry_command",
        command_id=command.command_id,
        subject=f"command:{target}",
        state=record.status.value,
        changed=True,
        sent_command_id=target,
    )


def replay_commands(command: ReplayCommands, ctx: CommandLogContext) -> list[ActionTaken]:
    """Run finished commands again, each under its own id (so still idempotent: what a
    command did before is not done twice). All or none: every one is checked before the
    first is replayed. A rejected command is refused with why it was rejected: it was the
    caller's mistake and would be rejected again."""
    journal = ctx.commands
    for target in command.target_command_ids:
        record = journal.get(target)
        if record is None:
            raise NotFound.resource("command", target)
        if record.status is CommandStatus.REJECTED:
            raise not_replayable(record.id, record.error)
    taken = []
    for target in command.target_command_ids:
        # The log checks again, under its row lock: a command rejected meanwhile stays so.
        requeued = found(journal.requeue(target), "command", target)
        publish_recorded(requeued, ctx.publisher(), journal)
        logger.info("operator replayed command %s", target)
        taken.append(
            ActionTaken(
                action="replay_command",
                command_id=command.command_id,
                subject=f"command:{target}",
                state=requeued.status.value,
                changed=True,
                sent_command_id=target,
            )
        )
    return taken


def replay_dead_letter(command: ReplayDeadLetter, ctx: OperatorContext) -> ActionTaken:
    """Put a dead letter's message back on its queue, if a worker can take it now (say, its
    task was unknown to the workers of the day), and drop the letter; one that still cannot
    be taken is refused and kept."""
    queue = ctx.replay_dead_letter(command.letter_id)
    logger.info("operator replayed dead letter %s onto %s", command.letter_id, queue)
    return ActionTaken(
        action="replay_dead_letter",
        command_id=command.command_id,
        subject=f"dead_letter:{command.letter_id}",
        state=f"on {queue}",
        changed=True,
    )


def skip_scheduled_change(command: SkipScheduledChange, ctx: HandlerContext) -> ActionTaken:
    """Skip a ``scheduled`` change: it is never sent. A ``staged`` one is made at the
    provider already, and one being applied is under way: both are refused."""
    with ctx.unit_of_work() as uow:
        change = found(
            uow.scheduled_changes.get(command.change_id, for_update=True),
            "scheduled_change",
            command.change_id,
        )
        if change.state is ChangeState.SKIPPED:
            return ActionTaken(
                action="skip_change",
                command_id=command.command_id,
                subject=f"scheduled_change:{change.id}",
                state=change.state.value,
                changed=False,
            )
        change.ensure_not_staged()
        if change.state is not ChangeState.SCHEDULED:
            raise FailedPrecondition(
                f"change {change.id!r} is {change.state.value}: only a scheduled change is skipped",
                details=[error_info("CHANGE_NOT_SCHEDULED", change_id=change.id)],
            )
        now = ctx.clock.now()
        change.skip(ChangeReason.SKIPPED_BY_OPERATOR, now, command.reason)
        uow.scheduled_changes.save(change)
        subscription = uow.subscriptions.get(change.subscription_id)
        uow.events.add(
            PlanChangeSkipped.of(
                change, command_id=command.command_id, now=now, subscription=subscription
            )
        )
        uow.commit()
    return ActionTaken(
        action="skip_change",
        command_id=command.command_id,
        subject=f"scheduled_change:{change.id}",
        state=change.state.value,
        changed=True,
    )


def subscription_story(query: ShowSubscription, ctx: HandlerContext) -> SubscriptionStory:
    """The subscription's story as the console read it, with its newest invoices read from
    the provider (at bulk priority: interactive commands go first). When the provider cannot
    be read, the story says why instead of failing."""
    story = query.story
    provider_id = str(story.subscription["provider_id"])
    ended = story.subscription["state"] in ENDED_STATES
    told: dict[str, Any] = {}
    try:
        provider = ctx.billing_provider()
    except CommandError as error:  # none configured (a CLI without Stripe's key): the rest
        told["invoices_error"] = _why(error)
        if not ended:
            told["next_invoice_error"] = _why(error)
        return story.model_copy(update=told)
    try:
        with calls_at(Priority.BULK):
            told["invoices"] = provider.list_invoices(provider_id, INVOICES_SHOWN)
    except Exception as error:  # the provider's hiccup is no reason to hide the rest
        told["invoices_error"] = _why(error)
    if not ended:
        try:
            with calls_at(Priority.BULK):
                told["next_invoice"] = provider.upcoming_invoice(provider_id)
        except Exception as error:
            told["next_invoice_error"] = _why(error)
    return story.model_copy(update=told)


ENDED_STATES = ("canceled", "ended")
"""A subscription in one of these has no next invoice to read."""


def _why(error: Exception) -> str:
    return error.message if isinstance(error, CommandError) else f"{type(error).__name__}: {error}"
