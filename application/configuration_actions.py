"""The operator actions on configuration rather than billing data: an API client's secret,
the webhook endpoints (added, disabled, enabled, their secrets rotated), the local stack's
clock. They are actions of the table (``application/operator_actions.py`` joins them to the
others) and are taken through its ``take``; each surface offers them from commands and routes
of their own, which print a new secret once (``worker/cli/clients.py``, ``webhooks.py``,
``clock.py``, ``worker/api/routes/webhooks.py``). What they change is not in the units of
work of the billing data, or writes no event, so their audit entry is written once they are
done (:attr:`~application.action_kinds.ActionKind.audited_after`), with the line each one's
``said`` tells: never a secret.

Nothing here imports a handler at import time.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from application.action_kinds import ActionKind, Call, ReasonUse, Surface, Target
from application.requests.operator_actions import (
    ClockMoved,
    MoveClock,
    RotateClientSecret,
    RotatedClientSecret,
)
from domain.permissions import Scope

if TYPE_CHECKING:
    from application.handlers.events.webhook_endpoints import (
        DisabledEndpoint,
        NewEndpoint,
        RotatedSecret,
    )
    from application.requests.operator_requests import (
        AddEndpoint,
        DisableEndpoint,
        EnableEndpoint,
        RotateSecret,
    )
    from domain.webhooks import WebhookEndpoint


def _add_endpoint(call: Call) -> AddEndpoint:
    from application.requests.operator_requests import AddEndpoint

    return AddEndpoint(
        call.target,
        tuple(call.options.get("events", ())),
        str(call.options.get("description", "")),
        allow_private_networks=bool(call.options.get("allow_private_networks", False)),
    )


def _disable_endpoint(call: Call) -> DisableEndpoint:
    from application.requests.operator_requests import DisableEndpoint

    return DisableEndpoint(call.target, call.reason)


def _enable_endpoint(call: Call) -> EnableEndpoint:
    from application.requests.operator_requests import EnableEndpoint

    return EnableEndpoint(call.target)


DEFAULT_SECRET_GRACE_SECONDS = 86_400.0
"""An endpoint's old secret's grace when a surface gives none (the setting's default)."""


def _rotate_endpoint_secret(call: Call) -> RotateSecret:
    from application.requests.operator_requests import RotateSecret

    grace = float(call.options.get("grace_seconds", DEFAULT_SECRET_GRACE_SECONDS))
    return RotateSecret(call.target, timedelta(seconds=grace))


def _endpoint_line(endpoint: WebhookEndpoint) -> str:
    return f"webhook endpoint {endpoint.id} ({endpoint.url})"


def _added(added: NewEndpoint) -> str:
    endpoint = added.endpoint
    events = ",".join(endpoint.event_types) or "every event"
    return f"{_endpoint_line(endpoint)} added, enabled, for {events}"


def _disabled(disabled: DisabledEndpoint) -> str:
    return (
        f"{_endpoint_line(disabled.endpoint)} disabled: {disabled.endpoint.disabled_reason}; "
        f"{disabled.abandoned} unfinished deliveries marked failed"
    )


def _rotated_endpoint(rotated: RotatedSecret) -> str:
    until = f"{rotated.previous_valid_until:%Y-%m-%d %H:%M:%S} UTC"
    return f"{_endpoint_line(rotated.endpoint)} has a new secret; the old one signs until {until}"


def _days(seconds: float) -> str:
    return f"{seconds / 86_400:.2f} days"


def _clock_moved(moved: ClockMoved) -> str:
    if not moved.duration:
        return f"the clock is back to real time (it was {_days(moved.was)} ahead)"
    return (
        f"advanced {moved.duration}; the clock is now {_days(moved.offset)} ahead "
        f"(it was {_days(moved.was)} ahead)"
    )


def _move_clock(call: Call) -> MoveClock:
    seconds = call.options.get("seconds")
    return MoveClock(
        command_id=call.action_id,
        seconds=None if seconds is None else float(seconds),
        duration=str(call.options.get("duration", "")),
        reason=call.reason,
    )


ENDPOINT = Target("webhook_endpoint", "endpoint_id")
DISABLED_ENDPOINT_MAX_REASON = 500
"""As ``application.handlers.events.webhook_endpoints.MAX_REASON`` (not imported: the table
loads no handler)."""
CLOCK = Target("clock", "clock")
LOCAL_CLOCK = "local"
"""The one clock's id (``clock:local``): the local stack's."""
ENDPOINT_SURFACES = frozenset({Surface.API, Surface.CLI})
CONFIGURATION_REASON = (
    "A reason is optional: the endpoint keeps its own record (its state, why it is disabled)."
)


def _clock_action(kind: str, *, title: str, summary: str, does: str) -> ActionKind[Any, Any]:
    """Moving the local stack's clock, ahead or back to real time: one handler, one view."""
    return ActionKind[MoveClock, ClockMoved](
        kind=kind,
        target=CLOCK,
        request=_move_clock,
        handler="operations.admin:move_clock",
        scope=Scope.OPERATIONS_WRITE,
        reason=ReasonUse.AUDITED,
        title=title,
        summary=summary,
        does=does,
        said=_clock_moved,
        view=lambda moved: moved.model_dump(mode="json"),
        surfaces=frozenset({Surface.CLI}),
        audited_after=True,
    )


CONFIGURATION_ACTIONS: tuple[ActionKind[Any, Any], ...] = (
    ActionKind[RotateClientSecret, RotatedClientSecret](
        kind="rotate-client-secret",
        target=Target("api_client", "client_id"),
        request=lambda call: RotateClientSecret(
            command_id=call.action_id, client_id=call.target, reason=call.reason
        ),
        handler="operations.admin:rotate_client_secret",
        scope=Scope.OPERATIONS_WRITE,
        reason=ReasonUse.AUDITED,
        title="Rotate the client's secret",
        summary="Give a client a new secret, printed once",
        does="The old one stops working (within BILLING_AUTH_CACHE_SECONDS in API processes "
        "that verified it recently). The audit trail keeps who rotated it and why, never the "
        "secret.",
        said=lambda rotated: (
            f"client {rotated.client_id} has a new secret; the old one no longer authenticates"
        ),
        view=lambda rotated: {"client_id": rotated.client_id},
        surfaces=frozenset({Surface.CLI}),
        audited_after=True,
    ),
    ActionKind["AddEndpoint", "NewEndpoint"](
        kind="add-webhook",
        target=Target("webhook_url", "url"),
        request=_add_endpoint,
        handler="events.webhook_endpoints:add_endpoint",
        scope=Scope.WEBHOOKS_MANAGE,
        reason=ReasonUse.AUDITED,
        title="Add a webhook endpoint",
        summary="Add a webhook endpoint",
        does="An enabled endpoint receives the events it names (every event by default), "
        "each signed with its secret, shown this once (never in the audit trail). "
        + CONFIGURATION_REASON,
        said=_added,
        view=lambda added: added.endpoint.to_view(),
        surfaces=ENDPOINT_SURFACES,
        reason_required=False,
        audited_after=True,
        subjects=lambda added: (f"{ENDPOINT.subject}:{added.endpoint.id}",),
    ),
    ActionKind["DisableEndpoint", "DisabledEndpoint"](
        kind="disable-webhook",
        target=ENDPOINT,
        request=_disable_endpoint,
        handler="events.webhook_endpoints:disable_endpoint",
        scope=Scope.WEBHOOKS_MANAGE,
        reason=ReasonUse.KEPT,
        title="Disable the webhook endpoint",
        summary="Stop sending to a webhook endpoint",
        does="Nothing more is sent to it; its unfinished deliveries are marked failed, to be "
        "replayed once it is enabled again. Disabling a disabled endpoint keeps its first "
        "reason. " + CONFIGURATION_REASON,
        said=_disabled,
        view=lambda disabled: {
            **disabled.endpoint.to_view(),
            "abandoned_deliveries": disabled.abandoned,
        },
        surfaces=ENDPOINT_SURFACES,
        reason_required=False,
        max_reason=DISABLED_ENDPOINT_MAX_REASON,
        audited_after=True,
    ),
    ActionKind["EnableEndpoint", "WebhookEndpoint"](
        kind="enable-webhook",
        target=ENDPOINT,
        request=_enable_endpoint,
        handler="events.webhook_endpoints:enable_endpoint",
        scope=Scope.WEBHOOKS_MANAGE,
        reason=ReasonUse.AUDITED,
        title="Enable the webhook endpoint",
        summary="Send to a webhook endpoint again",
        does="New events are sent to it again; its failed deliveries stay failed until "
        "replayed. " + CONFIGURATION_REASON,
        said=lambda endpoint: f"{_endpoint_line(endpoint)} enabled",
        view=lambda endpoint: endpoint.to_view(),
        surfaces=ENDPOINT_SURFACES,
        reason_required=False,
        audited_after=True,
    ),
    ActionKind["RotateSecret", "RotatedSecret"](
        kind="rotate-webhook-secret",
        target=ENDPOINT,
        request=_rotate_endpoint_secret,
        handler="events.webhook_endpoints:rotate_secret",
        scope=Scope.WEBHOOKS_MANAGE,
        reason=ReasonUse.AUDITED,
        title="Rotate the webhook endpoint's secret",
        summary="Give a webhook endpoint a new secret, printed once",
        does="The old one keeps signing beside it for BILLING_WEBHOOK_SECRET_GRACE_SECONDS, so "
        "that the receiver can switch. The audit trail keeps who rotated it and why, never the "
        "secret.",
        said=_rotated_endpoint,
        view=lambda rotated: {
            **rotated.endpoint.to_view(),
            "previous_secret_expires_at": rotated.previous_valid_until.isoformat(),
        },
        surfaces=ENDPOINT_SURFACES,
        audited_after=True,
    ),
    _clock_action(
        "advance-clock",
        title="Move the clock ahead",
        summary="Move the application clock and the Stripe emulator's together",
        does="Every process of the local stack and the emulator run on the moved clock: "
        "periods end and changes fall due as they would after that long.",
    ),
    _clock_action(
        "reset-clock",
        title="Bring the clock back to real time",
        summary="Bring the application clock and the Stripe emulator's back to real time",
        does="Data made while the clock was ahead keeps its times (a period that ends in a "
        "month of shifted time ends then).",
    ),
)
"""The actions on configuration rather than billing data: an API client's secret, the
webhook endpoints, the local stack's clock. Each surface offers them from its own commands
and routes (their secrets are printed there, and only there), through :func:`take`."""
