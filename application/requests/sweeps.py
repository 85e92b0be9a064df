"""What beat's sweeps (and the outbox relay) are asked to do, as messages.

A sweep is a business operation like a queued command: one handler in ``application/handlers``,
called ``handler(message, ctx)``. Its message carries what the operation is given (a batch
size, a budget of reads); most sweeps take all they need from the policy, and their message
is empty. These messages never travel: the task that runs a sweep (``tasks/*.py``) builds
one, so they are plain frozen dataclasses, not part of the queue's contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from domain.webhooks import DeliveryClaim

RELAY_MAX_BATCHES = 50
"""A relay run's work is bounded; what is left goes with the next command or sweep."""

# The names beat sends its sweeps under (``tasks/*.py`` runs them; the queues' configuration,
# ``adapters/messaging/config.py``, routes and schedules them). A public contract: never rename.

RELAY_EVENTS = "events.relay"
"""Publishes the events a worker left behind (each command relays its own right away)."""

ENQUEUE_DUE_CHANGES = "subscriptions.enqueue_due_changes"
"""Beat's sweep of plan changes that fell due (runs on the maintenance queue, so that it is
never stuck behind the apply commands it publishes)."""

REDRIVE_PENDING_ACCOUNTS = "billing.redrive_pending_accounts"
"""Beat's sweep of accounts left ``pending`` (runs on the maintenance queue, never behind the
registrations it publishes)."""

RECONCILE_WITH_STRIPE = "stripe.reconcile"
"""Beat's sweep re-reading the rows read from Stripe longest ago (on the maintenance queue)."""

REPUBLISH_STALLED_COMMANDS = "maintenance.republish_stalled_commands"

PRUNE_COMMAND_LOG = "maintenance.prune_command_log"
"""Beat's sweep of finished commands older than their retention (a batch budget per run),
and of the outbox's deliveries and events (the same retention)."""

CONSUMER_HEARTBEAT = "heartbeat.consumer"
"""Not a sweep: the message a worker node sends itself through its own queue every
``BILLING_HEARTBEAT_INTERVAL_SECONDS``; its run records the node's consumer heartbeat
(``adapters/messaging/heartbeats.py``): proof that the node takes messages off Redis, not
only that its process runs."""


@dataclass(frozen=True)
class RelayEvents:
    """Publish what the events outbox holds unpublished, in at most ``max_batches`` batches
    (beat's relay sweep)."""

    max_batches: int = RELAY_MAX_BATCHES


DUE_CHANGES_CHUNK = 50
"""Due changes claimed, then published, at a time within one run of the sweep."""


@dataclass(frozen=True)
class PublishDueChanges:
    """Beat's sweep of plan changes: staged ones whose boundary passed take effect, and an
    apply command is published for each change that fell due, ``chunk_size`` claims at a
    time. A run starts no new chunk once the policy's ``due_changes_run_seconds`` have
    passed: a period-end burst's first run would otherwise claim the rate budget's whole
    horizon (500 changes at Stripe's live rate, about 0.2 ms of publishing each) in one long
    run; what is left goes to the next run, which its task sends at once. The runs that
    follow one of beat's carry what the earlier ones claimed: together they claim no more than
    the policy's ``due_changes_batch_size``, as one run did."""

    chunk_size: int = DUE_CHANGES_CHUNK
    claimed_before: int = 0
    """Changes the earlier runs of this beat's sweep claimed."""


@dataclass(frozen=True)
class TakeEffectOfStagedChanges:
    """Make up to ``batch_size`` staged changes whose boundary passed take effect here."""

    batch_size: int


@dataclass(frozen=True)
class FindWithdrawalsGivenUp:
    """Up to ``batch_size`` staged changes whose withdrawal was given up, each to be finished
    by a command of its own."""

    batch_size: int


@dataclass(frozen=True)
class ClaimDueChanges:
    """Claim up to ``batch_size`` changes that fell due; with an ``apply_rate`` (changes per
    second the provider's budget allows), no more than can be applied within
    ``horizon_seconds``."""

    batch_size: int
    apply_rate: float | None = None
    horizon_seconds: float = 0.0


@dataclass(frozen=True)
class RepublishStalledCommands:
    """Beat's sweep: publish again the commands recorded but never started."""


@dataclass(frozen=True)
class RecoverFromFailover:
    """Beat's watch of the broker's primary (a thread of beat's, every beat interval): after a
    failover, publish again the commands and apply commands it may have dropped."""


@dataclass(frozen=True)
class RedrivePendingAccounts:
    """Beat's sweep: send the registration of each account pending too long again."""


@dataclass(frozen=True)
class ReconcileWithStripe:
    """Beat's sweep: spend ``reads`` Stripe reads (calls: a page of a list is one) on the
    renewal checks due, the rows a completed pass did not show, and the next pages of
    Stripe's lists (``application/handlers/provider/reconcile.py``)."""

    reads: int


@dataclass(frozen=True)
class CheckDueRenewals:
    """Read the renewal invoices of up to ``limit`` renewal checks due (part of the
    reconciliation sweep, which spends its reads on them first)."""

    limit: int


@dataclass(frozen=True)
class PruneCommandLog:
    """Delete the finished commands older than their retention: within the policy's batch
    budget (beat's sweep), or ``until_done`` (an operator, who waits for it)."""

    until_done: bool = False


@dataclass(frozen=True)
class CountDueForPruning:
    """What :class:`PruneCommandLog` would delete now (a dry run: deletes nothing)."""


@dataclass(frozen=True)
class PruneOutbox:
    """Delete the deliveries and events the outbox no longer needs (beat's sweep)."""


@dataclass(frozen=True)
class SendDueDeliveries:
    """Beat's sweep: claim the webhook deliveries that fell due and publish them."""


@dataclass(frozen=True)
class PublishDeliveries:
    """Send the message of each claimed webhook delivery."""

    claims: Sequence[DeliveryClaim]
