"""Operator actions on webhook endpoints and their deliveries (``billing-worker webhooks``,
``/v1beta1/webhooks``).

They are configuration, not billing commands: each runs at once, in one unit of work, and
is never journalled as a command. Sending is the delivery task's business; these only move
deliveries between states (a replayed delivery becomes ``pending`` and due now, and the
sweep sends it).

An endpoint's row is locked (``for_update``) before its deliveries are touched, so that a
disable and a replay of the same endpoint take turns instead of interleaving.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from application.requests.operator_requests import (
    AddEndpoint,
    DisableEndpoint,
    EnableEndpoint,
    GetEndpoint,
    ListDeliveries,
    ListEndpoints,
    ReplayDeliveries,
    ReplayFailed,
    RotateSecret,
)
from domain.errors import FailedPrecondition, InvalidArgument, error_info, found
from domain.messages import unstorable_values
from domain.ports.application import HandlerContext
from domain.ports.repositories import UnitOfWork
from domain.webhooks import DeliveryState, WebhookDelivery, WebhookEndpoint

ENDPOINT = "webhook_endpoint"
DELIVERY = "webhook_delivery"
MAX_DESCRIPTION = 255
MAX_REASON = 500
MAX_LIST_LIMIT = 1000
DEFAULT_DISABLE_REASON = "disabled by an operator"


@dataclass(frozen=True)
class NewEndpoint:
    """An endpoint just added, and its signing secret: the only time it is shown."""

    endpoint: WebhookEndpoint
    secret: str


@dataclass(frozen=True)
class DisabledEndpoint:
    endpoint: WebhookEndpoint
    abandoned: int
    """How many unfinished deliveries were marked failed (they can be replayed)."""


@dataclass(frozen=True)
class RotatedSecret:
    """The endpoint's new secret (shown once); the previous one still signs beside it until
    ``previous_valid_until``."""

    endpoint: WebhookEndpoint
    secret: str
    previous_valid_until: datetime


def add_endpoint(request: AddEndpoint, svc: HandlerContext) -> NewEndpoint:
    """Add an enabled endpoint for ``events`` (catalog types; none, or ``*``: every event).
    A bad URL, an unknown event type or a description over 255 characters is an
    ``InvalidArgument`` naming the field; so is a URL naming a host that is not public,
    unless ``allow_private_networks`` (the setting of that name)."""
    url, events, description = request.url, request.events, request.description
    _storable(url=url, description=description, events=list(events))
    if any(char.isspace() or not char.isprintable() for char in url.strip()):
        raise InvalidArgument.for_fields(
            "the URL holds spaces or control characters",
            [("url", "must be an http or https URL without spaces")],
        )
    if len(description) > MAX_DESCRIPTION:
        raise InvalidArgument.for_fields(
            f"the description is longer than {MAX_DESCRIPTION} characters",
            [("description", f"at most {MAX_DESCRIPTION} characters")],
        )
    try:
        endpoint = WebhookEndpoint.new(
            url,
            list(events),
            svc.clock.now(),
            description=description,
            allow_private_networks=request.allow_private_networks,
        )
    except ValueError:
        # urlsplit's own refusals (a broken IPv6 host, say): a bad URL like any other.
        raise InvalidArgument.for_fields(
            f"{url[:100]!r} is not an http(s) URL", [("url", "must be an http or https URL")]
        ) from None
    with svc.unit_of_work() as uow:
        uow.webhook_endpoints.add(endpoint)
        uow.commit()
    return NewEndpoint(endpoint, endpoint.secret)


def list_endpoints(request: ListEndpoints, svc: HandlerContext) -> list[WebhookEndpoint]:
    """Every endpoint, oldest first."""
    with svc.unit_of_work() as uow:
        return uow.webhook_endpoints.all()


def get_endpoint(request: GetEndpoint, svc: HandlerContext) -> WebhookEndpoint:
    """The endpoint, or ``NotFound``."""
    endpoint_id = request.endpoint_id
    with svc.unit_of_work() as uow:
        return found(uow.webhook_endpoints.get(endpoint_id), ENDPOINT, endpoint_id)


def disable_endpoint(request: DisableEndpoint, svc: HandlerContext) -> DisabledEndpoint:
    """Disable the endpoint (nothing more is sent to it) and mark its unfinished deliveries
    failed, with the reason ``endpoint disabled: …``; they can be replayed once it is enabled
    again. Disabling a disabled endpoint keeps its first reason."""
    endpoint_id, reason = request.endpoint_id, request.reason
    # One line of printable text: operators read it in a terminal's table.
    reason = " ".join("".join(c if c.isprintable() else " " for c in reason).split())
    reason = reason or DEFAULT_DISABLE_REASON
    if len(reason) > MAX_REASON:
        raise InvalidArgument.for_fields(
            f"the reason is longer than {MAX_REASON} characters",
            [("reason", f"at most {MAX_REASON} characters")],
        )
    now = svc.clock.now()
    with svc.unit_of_work() as uow:
        endpoint = _locked_endpoint(uow, endpoint_id)
        if endpoint.disable(reason, now):
            uow.webhook_endpoints.save(endpoint)
        abandoned = 0
        why = f"endpoint disabled: {endpoint.disabled_reason or reason}"
        for listed in uow.webhook_deliveries.unfinished_for_endpoint(endpoint_id):
            # Read again under a lock: a worker may have finished it meanwhile.
            delivery = uow.webhook_deliveries.get(listed.id, for_update=True)
            if delivery is None or delivery.state.is_finished:
                continue
            delivery.abandon(why, now)
            uow.webhook_deliveries.save(delivery)
            abandoned += 1
        uow.commit()
    return DisabledEndpoint(endpoint, abandoned)


def enable_endpoint(request: EnableEndpoint, svc: HandlerContext) -> WebhookEndpoint:
    """Enable the endpoint: new events are delivered to it again. Deliveries that failed
    meanwhile stay failed until replayed. Enabling an enabled endpoint changes nothing."""
    with svc.unit_of_work() as uow:
        endpoint = _locked_endpoint(uow, request.endpoint_id)
        if endpoint.enable(svc.clock.now()):
            uow.webhook_endpoints.save(endpoint)
            uow.commit()
    return endpoint


def rotate_secret(request: RotateSecret, svc: HandlerContext) -> RotatedSecret:
    """Give the endpoint a new secret; the current one keeps signing beside it for ``grace``
    (the caller's ``BILLING_WEBHOOK_SECRET_GRACE_SECONDS``), so that receivers can switch.
    A secret rotated out earlier and still in its grace stops signing at once."""
    endpoint_id, grace = request.endpoint_id, request.grace
    now = svc.clock.now()
    with svc.unit_of_work() as uow:
        endpoint = _locked_endpoint(uow, endpoint_id)
        secret = endpoint.rotate_secret(now, grace)
        uow.webhook_endpoints.save(endpoint)
        uow.commit()
    return RotatedSecret(endpoint, secret, now + grace)


def list_deliveries(request: ListDeliveries, svc: HandlerContext) -> list[WebhookDelivery]:
    """Deliveries, newest first, filtered by state (``failed_only``: failed), endpoint and
    event. An unknown endpoint is ``NotFound``; an unknown event simply has none."""
    state, endpoint_id, limit = request.state, request.endpoint_id, request.limit
    failed_only, event_id = request.failed_only, request.event_id
    if failed_only:
        if state is not None and state is not DeliveryState.FAILED:
            raise InvalidArgument.for_fields(
                f"only failed deliveries, or those {state.value}: not both",
                [("state", "contradicts failed_only")],
            )
        state = DeliveryState.FAILED
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidArgument.for_fields(
            f"limit {limit} is not between 1 and {MAX_LIST_LIMIT}",
            [("limit", f"must be between 1 and {MAX_LIST_LIMIT}")],
        )
    with svc.unit_of_work() as uow:
        if endpoint_id is not None:
            found(uow.webhook_endpoints.get(endpoint_id), ENDPOINT, endpoint_id)
        return uow.webhook_deliveries.find(
            state=state, endpoint_id=endpoint_id, event_id=event_id, limit=limit
        )


def replay_deliveries(request: ReplayDeliveries, svc: HandlerContext) -> list[WebhookDelivery]:
    """Make each failed delivery ``pending`` again, due now, with a whole new retry budget.
    All or none: an unknown delivery is ``NotFound``, one that has not failed or whose
    endpoint is disabled is ``FailedPrecondition``, and then none is replayed."""
    now = svc.clock.now()
    replayed: list[WebhookDelivery] = []
    with svc.unit_of_work() as uow:
        checked: set[str] = set()
        for delivery_id in dict.fromkeys(request.delivery_ids):
            delivery = found(
                uow.webhook_deliveries.get(delivery_id, for_update=True), DELIVERY, delivery_id
            )
            if delivery.endpoint_id not in checked:
                _require_enabled(_locked_endpoint(uow, delivery.endpoint_id), delivery)
                checked.add(delivery.endpoint_id)
            delivery.replay(now)
            uow.webhook_deliveries.save(delivery)
            replayed.append(delivery)
        uow.commit()
    return replayed


def replay_failed(request: ReplayFailed, svc: HandlerContext) -> int:
    """Replay every failed delivery of the endpoint (which must be enabled), in batches of
    short transactions, oldest first: a subject's older deliveries are pending before its
    newer ones are, so that they go out in order; returns how many."""
    endpoint_id, batch_size = request.endpoint_id, request.batch_size
    total = 0
    while True:
        now = svc.clock.now()
        with svc.unit_of_work() as uow:
            endpoint = _locked_endpoint(uow, endpoint_id)
            _require_enabled(endpoint)
            batch = uow.webhook_deliveries.find(
                state=DeliveryState.FAILED,
                endpoint_id=endpoint_id,
                limit=batch_size,
                oldest_first=True,
            )
            for listed in batch:
                delivery = uow.webhook_deliveries.get(listed.id, for_update=True)
                if delivery is None or delivery.state is not DeliveryState.FAILED:
                    continue
                delivery.replay(now)
                uow.webhook_deliveries.save(delivery)
                total += 1
            uow.commit()
        # A replayed delivery is pending, so the next batch holds only those not yet taken.
        if len(batch) < batch_size:
            return total


def _locked_endpoint(uow: UnitOfWork, endpoint_id: str) -> WebhookEndpoint:
    return found(uow.webhook_endpoints.get(endpoint_id, for_update=True), ENDPOINT, endpoint_id)


def _require_enabled(endpoint: WebhookEndpoint, delivery: WebhookDelivery | None = None) -> None:
    if endpoint.is_enabled:
        return
    what = f"delivery {delivery.id!r}" if delivery is not None else "its failed deliveries"
    raise FailedPrecondition(
        f"endpoint {endpoint.id!r} is disabled ({endpoint.disabled_reason}); enable it "
        f"before replaying {what}",
        details=[error_info("ENDPOINT_DISABLED", endpoint_id=endpoint.id)],
    )


def _storable(**values: object) -> None:
    """Refuse text no database can keep (a NUL character, a lone surrogate)."""
    problems = unstorable_values(values)
    if problems:
        field, why = problems[0]
        raise InvalidArgument.for_fields(f"{field} {why}", problems)
