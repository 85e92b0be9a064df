"""Webhooks out: retries, timeouts, which receivers may be named (``adapters/outbound``)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from worker.settings.section import Section


class OutboundSettings(Section):
    """Webhooks out: retries, timeouts, which receivers may be named (``adapters/outbound``)."""

    title: ClassVar[str] = "Outbound webhooks"

    webhook_retry_base_seconds: float = Field(
        default=5.0, gt=0, description="Backoff of a failed webhook delivery's first retry."
    )
    webhook_retry_max_seconds: float = Field(
        default=3600.0, gt=0, description="The longest backoff between two attempts."
    )
    webhook_retry_budget_seconds: float = Field(
        default=86_400.0,
        gt=0,
        description="How long a delivery is retried after its first attempt; then it fails "
        "and its endpoint is disabled.",
    )
    webhook_timeout_seconds: float = Field(
        default=10.0, gt=0, description="How long a receiver has to answer."
    )
    webhook_lease_seconds: float = Field(
        default=900.0,
        gt=0,
        description="How long a claimed delivery is left to its message (queued, then "
        "attempted) before the sweep takes it again; above the broker's visibility timeout, "
        "which hands a dead worker's message back first.",
    )
    webhook_allow_private_networks: bool | None = Field(
        default=None,
        description="Let webhook endpoints name localhost or private, link-local and other "
        "addresses that are not public. Unset: only beside a running `up` (a machine's own "
        "stack); set it true for receivers inside your network.",
    )
    webhook_secret_grace_seconds: float = Field(
        default=86_400.0,
        ge=0,
        description="After a secret rotation, how long the old secret still signs too.",
    )

    def resolved_webhook_allow_private_networks(self) -> bool:
        """Whether receivers may be private addresses: as set; unset, no (a process beside a
        running ``up`` is handed yes: :mod:`worker.local.stack_state`)."""
        return bool(self.webhook_allow_private_networks)
