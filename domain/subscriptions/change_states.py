"""The states a plan change goes through (:class:`ChangeState`), its two kinds (now, or at the
period's end) and why it was canceled or skipped (:class:`ChangeReason`); the change itself is
:class:`domain.subscriptions.scheduled_changes.ScheduledChange`."""

from __future__ import annotations

from enum import StrEnum

from domain.subscriptions.subscription import SubscriptionState


class ChangeState(StrEnum):
    SCHEDULED = "scheduled"
    APPLYING = "applying"
    STAGED = "staged"
    """Made at the provider ahead of its boundary; it takes effect here at ``effective_at``."""
    AWAITING_PAYMENT = "awaiting_payment"
    """An immediate change held at the provider (a pending update) until the customer pays
    its invoice, which needs the customer's authentication; it takes effect when paid, and
    lapses (``skipped``, ``payment_not_completed``) when the provider expires it."""
    APPLIED = "applied"
    CANCELED = "canceled"
    SKIPPED = "skipped"

    @property
    def is_pending(self) -> bool:
        return self in (
            ChangeState.SCHEDULED,
            ChangeState.APPLYING,
            ChangeState.STAGED,
            ChangeState.AWAITING_PAYMENT,
        )


class ChangeKind(StrEnum):
    IMMEDIATE = "immediate"
    END_OF_PERIOD = "end_of_period"


class ChangeReason(StrEnum):
    """Why a change was canceled or skipped (``reason`` of the change)."""

    REPLACED = "replaced"
    """A newer end-of-period request took its place."""
    SUPERSEDED = "superseded"
    """An immediate change was made before it fell due."""
    CANCELED_ON_REQUEST = "canceled_on_request"
    """``phase_change.cancel_upcoming_changes``."""
    SUBSCRIPTION_CANCELED = "subscription_canceled"
    SUBSCRIPTION_ENDED = "subscription_ended"
    SUBSCRIPTION_PAST_DUE = "subscription_past_due"
    """An immediate change found the subscription not in good standing at the provider."""
    SUBSCRIPTION_ENDS = "subscription_ends"
    """The subscription is set to end at or before the change's boundary: nothing is billed
    from there on, so there is nothing to change."""
    CUSTOMER_DELETED = "customer_deleted"
    """The subscription's customer was deleted at the provider, which ended it."""
    PAYMENT_FAILED = "payment_failed"
    """The provider could not collect the invoice of an immediate change, and made nothing."""
    PAYMENT_NOT_COMPLETED = "payment_not_completed"
    """An immediate change that awaited the customer's payment (``awaiting_payment``) lapsed:
    the provider expired its pending update unpaid (after 23 h, or at the period's end)."""
    PROVIDER_SCHEDULE = "provider_schedule"
    """A subscription schedule at the provider (made in Stripe's dashboard) manages the
    subscription: its phases set the price at each boundary, and a change sent over them
    would be undone, so it is never sent."""
    PROVIDER_REJECTED = "provider_rejected"
    """The provider refused the change for good (the message follows the reason)."""
    SKIPPED_BY_OPERATOR = "skipped_by_operator"
    """An operator skipped it before it was sent (their reason follows)."""
    WITHDRAWAL_FINISHED = "withdrawal_finished"
    """A request took it back (a cancel, a replacement, an immediate change) and gave up, its
    retries spent, after its write may have reached the provider: beat finished taking it
    back, under the same keys, rather than let it take effect here while the provider may
    hold the old price (found by the fault schedules, seed 2014)."""
    CORRECTED_LATE = "corrected_late"
    """Of an applied change: the provider renewed (at the old price) before the change sent
    ahead of its boundary reached it, and the new period was corrected (prorated from its
    start, invoiced at once). Recorded before the correction is sent, so that a retry
    corrects too."""

    @classmethod
    def subscription_in(cls, state: SubscriptionState) -> ChangeReason:
        """Why a change of a subscription in ``state`` (canceled, ended, past due) is skipped."""
        if state is SubscriptionState.ENDED:
            return cls.SUBSCRIPTION_ENDED
        if state is SubscriptionState.PAST_DUE:
            return cls.SUBSCRIPTION_PAST_DUE
        return cls.SUBSCRIPTION_CANCELED
