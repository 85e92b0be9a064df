"""``billing-worker clock``: the local stack's clock."""

from __future__ import annotations

import click

from worker.cli.base import REDIS_ENV, BillingGroup, fail
from worker.settings import get_settings


@click.group(cls=BillingGroup)
def clock() -> None:
    """The local stack's clock (never available with real Stripe)."""


@clock.command("advance", settings_env=REDIS_ENV)
@click.argument("duration")
def clock_advance(duration: str) -> None:
    """Move the application clock and the Stripe emulator's together, e.g. `31d`, `2h`."""
    from worker.clock import ShiftableClock
    from worker.local.stack import require_emulator

    require_emulator()
    from stripe_emulator import EmulatorAdmin, parse_duration

    try:
        seconds = parse_duration(duration)
    except ValueError as error:
        fail(f"invalid DURATION {duration!r}: {error}")
    settings = get_settings()
    stack = settings.stack()
    if not stack.get("shiftable_clock"):
        fail("the clock can only move on a local stack started by `up` with the Stripe emulator")
    # Stripe first: once the application's clock moves, beat may apply a change that fell
    # due, and the provider must already be in the new period when it does.
    emulator_url = stack.get("stripe_emulator_url")
    if emulator_url:
        EmulatorAdmin(str(emulator_url)).advance_clock(seconds)
    offset = ShiftableClock(settings.resolved_redis_url()).advance(seconds)
    click.echo(f"advanced {duration}; the clock is now {offset / 86400:.2f} days ahead")
