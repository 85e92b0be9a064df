"""Stripe: the key, the endpoint, the shared rate budget, and its webhooks in
(``adapters/provider``).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, SecretStr

from worker.settings.section import Section


class ProviderSettings(Section):
    """Stripe: the key, the endpoint, the shared rate budget, and its webhooks in
    (``adapters/provider``).
    """

    title: ClassVar[str] = "Provider (Stripe)"

    stripe_api_key: SecretStr | None = Field(
        default=None, description="Stripe secret key; unset: the local Stripe emulator."
    )
    stripe_api_base: str | None = Field(
        default=None,
        description="Stripe API base URL; unset: api.stripe.com with a key, "
        "else the emulator recorded in stack.json.",
    )
    stripe_timeout_seconds: float = Field(
        default=30.0, gt=0, description="Timeout of one Stripe request (then retried)."
    )
    stripe_budget_enabled: bool = Field(
        default=True,
        description="Meter every Stripe call through the account's shared rate budget in Redis "
        "(off: calls go out as fast as workers make them, as before the budget existed).",
    )
    stripe_rate_per_second: float | None = Field(
        default=None,
        gt=0,
        description="Stripe calls per second for reads and for writes alike; unset: Stripe's "
        "published limit for the key's mode (25 in test mode, 100 in live mode).",
    )
    stripe_burst: int | None = Field(
        default=None,
        ge=0,
        description="Calls interactive commands may make ahead of the pace (bulk calls never "
        "burst); unset: a fifth of a second's rate.",
    )
    stripe_max_wait_seconds: float = Field(
        default=1.0,
        ge=0,
        description="The longest a task blocks its process for a budget token; a longer wait "
        "re-queues the task until its token is due (not counted as a retry).",
    )
    provider_idempotency_window_seconds: float = Field(
        default=23 * 3600.0,
        gt=0,
        description="A registration retried after this long searches Stripe for the customer "
        "before creating it (Stripe forgets idempotency keys after 24 hours).",
    )
    stripe_webhook_secrets: str = Field(
        default="",
        description="Signing secrets (whsec_…, comma-separated) of Stripe webhook endpoints "
        "whose events this deployment accepts, besides those `billing-worker stripe webhooks "
        "register` stored; several during a rotation.",
    )
    stripe_webhook_max_failures_per_source: int = Field(
        default=20,
        ge=1,
        description="Stripe webhook deliveries from one source address refused for their "
        "signature (or size) within `BILLING_AUTH_FAILURE_WINDOW_SECONDS` before that source's "
        "deliveries are answered 429 before their body is read. Stripe signs every delivery "
        "afresh, so only a misconfigured secret or someone else fails here.",
    )

    def resolved_stripe_api_key(self) -> str | None:
        """The secret key, or ``None``: the local Stripe emulator (whose key and URL a process
        beside ``up`` is handed: :mod:`worker.local.stack_state`)."""
        return self.stripe_api_key.get_secret_value() if self.stripe_api_key else None
