"""Beat: how often each periodic sweep runs, and how much it takes at once."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from worker.settings.section import Section


class SweepSettings(Section):
    """Beat: how often each periodic sweep runs, and how much it takes at once."""

    title: ClassVar[str] = "Sweeps (beat)"

    beat_interval_seconds: float = Field(default=5.0, gt=0, description="Period of beat sweeps.")
    scheduled_changes_interval_seconds: float = Field(
        default=1.0,
        gt=0,
        description="How often beat looks for plan changes that fell due (each sweep claims "
        "what the Stripe budget can apply before the next ones).",
    )
    scheduled_changes_batch_size: int = Field(
        default=500, ge=1, le=5000, description="The most due plan changes one sweep claims."
    )
    scheduled_changes_run_seconds: float = Field(
        default=0.02,
        ge=0,
        description="How long one run of the due-changes sweep keeps claiming and publishing "
        "(50 changes at a time); a run that stops with due work left sends the next run at "
        "once, so a period-end burst is fed in short runs rather than one long one.",
    )
    reconcile_interval_seconds: float = Field(
        default=10.0,
        gt=0,
        description="How often beat's reconciliation sweep (the backstop for webhooks) reads "
        "the next pages of Stripe's customer and subscription lists, from where its last run "
        "stopped, and brings in line the rows that differ.",
    )
    reconcile_reads_per_second: float = Field(
        default=5.0,
        gt=0,
        description="Stripe reads (calls) per second the reconciliation sweep may spend, at "
        "bulk priority within the shared budget: the renewal checks due first, then rows a "
        "completed pass did not show (read one by one), then pages of 100 of Stripe's lists. "
        "A pass over 1,000,000 subscriptions is about 10,000 pages (and a fifth more for the "
        "customers): about 12,000 / this seconds (40 minutes at 5/s).",
    )
    pending_account_redrive_interval_seconds: float = Field(
        default=300.0,
        gt=0,
        description="How often beat looks for billing accounts stuck `pending` (a sweep "
        "within the same re-drive period sends the same command again, which runs once).",
    )
    command_retention_interval_seconds: float = Field(
        default=300.0,
        gt=0,
        description="How often beat prunes the command log. With the batch defaults (1,000 "
        "commands a batch, 100 batches a sweep) a sweep every 5 minutes keeps up with 333 "
        "commands a second, each sweep short (docs/explanation/capacity.md).",
    )
    events_relay_interval_seconds: float = Field(
        default=5.0,
        gt=0,
        description="How often beat publishes events a worker left behind (each worker "
        "process publishes its commands' events as they finish).",
    )
    events_relay_coalesce_seconds: float = Field(
        default=0.05,
        ge=0,
        le=5,
        description="The shortest time between two relays of one worker node (its processes "
        "share it). An idle node relays a command's events as soon as it finishes; under load, "
        "the events of every command finished within this time go out together (one lock, one "
        "read, one stream append), which is what lets a worker keep up. 0: a relay after "
        "every command.",
    )
    webhook_sweep_interval_seconds: float = Field(
        default=2.0, gt=0, description="How often beat sends deliveries that are due."
    )
