"""Operator actions on what is not billing data: an API client's secret and the local
stack's clock. What they change is outside the unit of work (the clients' table through its
adapter, the clock in the emulator and Redis), so their audit entry is written once they are
done (``application/operator_actions.py``); neither ever holds the new secret."""

from __future__ import annotations

from application.requests.operator_actions import (
    ClockMoved,
    MoveClock,
    RotateClientSecret,
    RotatedClientSecret,
)
from domain.ports.application import OperatorContext


def rotate_client_secret(request: RotateClientSecret, ctx: OperatorContext) -> RotatedClientSecret:
    """A new secret for the client (returned once); the old one stops working. ``NotFound``
    for an unknown client."""
    return RotatedClientSecret(request.client_id, ctx.rotate_client_secret(request.client_id))


def move_clock(request: MoveClock, ctx: OperatorContext) -> ClockMoved:
    """Move the local stack's clock ahead by ``request.seconds``, or back to real time
    without; ``FailedPrecondition`` where there is no local stack's clock to move."""
    clock = ctx.stack_clock()
    was = clock.offset()
    if request.seconds is None:
        clock.reset()
        return ClockMoved(duration="", was=was, offset=0.0)
    return ClockMoved(duration=request.duration, was=was, offset=clock.advance(request.seconds))
