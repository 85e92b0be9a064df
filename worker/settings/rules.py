"""The rules the use cases apply: currency, proration, the period end, retries, how long the
command log keeps what (``application/``).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from domain.billing.currencies import currency_code
from domain.subscriptions.proration import ProrationBehavior
from worker.settings.section import Section


class BillingRulesSettings(Section):
    """The rules the use cases apply: currency, proration, the period end, retries, how long the
    command log keeps what (``application/``).
    """

    title: ClassVar[str] = "Billing rules"

    default_currency: str = Field(
        default="usd",
        description="Currency of a billing account created without one (ISO 4217, one Stripe "
        "accepts; any case, used in lower case).",
    )
    proration_behavior: ProrationBehavior = Field(
        default="create_prorations",
        description="Stripe's proration_behavior for immediate plan changes (a change at a "
        "period's end is never prorated). With create_prorations an upgrade is still invoiced "
        "at once and made only if paid (always_invoice); a downgrade's credit waits for the "
        "next invoice.",
    )
    period_end_lead_seconds: float = Field(
        default=3600.0,
        ge=0,
        description="How long before its period's end a plan change at the period's end is "
        "made at Stripe (without proration), so that Stripe's renewal invoices the new period "
        "at the new price; longer than a period-end burst takes to drain at the Stripe budget "
        "(10,000 changes at 25 writes/s: 400 s).",
    )
    staged_change_guard_seconds: float = Field(
        default=5.0,
        ge=0,
        description="A plan change already made at Stripe ahead of its period's end (within "
        "the lead) is taken back for a cancel, a replacement or an immediate change until "
        "this long before the boundary; later such requests get 400 CHANGE_ALREADY_STAGED. "
        "A withdrawal Stripe receives after it renewed is corrected (prorated back).",
    )
    retry_max_attempts: int = Field(
        default=8, ge=1, description="Attempts per command for transient failures."
    )
    retry_base_delay_seconds: float = Field(
        default=1.0,
        gt=0,
        description="Backoff of a command's transient failures: the n-th retry waits a delay "
        "drawn uniformly in [0, min(max, base·2^n)] (full jitter), at least the provider's "
        "Retry-After.",
    )
    retry_max_delay_seconds: float = Field(
        default=60.0, gt=0, description="The longest backoff between two attempts of a command."
    )
    stalled_command_seconds: float = Field(
        default=300.0,
        gt=0,
        description="A queued command older than this, a retrying one this long past its "
        "retry's time, or a running one this long past the broker's visibility timeout, is "
        "published again (its message was lost).",
    )
    scheduled_change_lease_seconds: float = Field(
        default=900.0,
        gt=0,
        description="How long a worker has to apply a claimed plan change before a sweep "
        "hands it to another (a killed worker); longer than a command's retry budget.",
    )
    pending_account_redrive_after_seconds: float = Field(
        default=900.0,
        gt=0,
        description="A billing account still `pending` (not registered with Stripe) this long "
        "after it was opened has its registration sent again by beat, and again after each "
        "further period of this length (one command per account and period); longer than a "
        "registration's retries take.",
    )
    command_retention_days: int = Field(
        default=30,
        ge=1,
        description="A succeeded command is deleted from the command log this many days after "
        "it finished, with its idempotency key (a key can then be used again: a new command).",
    )
    failed_command_retention_days: int = Field(
        default=90,
        ge=1,
        description="A failed command is kept this many days after it failed, for operators "
        "to see and replay (a replay makes it queued again: its age counts from its new run).",
    )
    rejected_command_retention_days: int = Field(
        default=7,
        ge=1,
        description="A rejected command (the caller's mistake: never replayed, paging nobody) "
        "is kept this many days after it was rejected.",
    )
    command_retention_batch: int = Field(
        default=1000,
        ge=1,
        le=10_000,
        description="Commands one transaction of the command log's pruning deletes.",
    )
    command_retention_rest_ratio: float = Field(
        default=9.0,
        ge=0,
        le=100,
        description="After each batch that deleted, beat's pruning rests this many times the "
        "batch's own time, so that its deletes take at most a tenth of the database while "
        "they last (0: no rest); an operator's prune does not rest.",
    )
    command_retention_max_batches: int = Field(
        default=100,
        ge=1,
        description="Batches one pruning sweep deletes at most; the rest waits for the next.",
    )

    @field_validator("default_currency")
    @classmethod
    def _default_currency(cls, value: str) -> str:
        return currency_code(value)
