"""``billing-worker clock``: the local stack's clock.

The application clock (real time plus an offset kept in Redis, :mod:`adapters.clock`) and the
Stripe emulator's clock move together. The one offset is the emulator's, kept in its state file
in the data directory, which ``up`` and ``up --ha`` both start it on; the application's in Redis
is its copy, written by ``up`` and by ``clock advance`` (:mod:`worker.local.stack_clock`). So
it survives a restart of ``up`` in either mode; ``clock reset`` or ``up --fresh`` bring real
time back.
"""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from adapters.clock import ShiftableClock, clock_client
from worker.cli.base import REDIS_ENV, BillingGroup, as_json_option, emit, fail
from worker.local.stack_state import read_stack, stack_settings
from worker.settings import get_settings

NOT_A_LOCAL_STACK = (
    "the clock can only move on a local stack started by `up` with the Stripe emulator"
)


@click.group(cls=BillingGroup)
def clock() -> None:
    """The local stack's clock (never available with real Stripe)."""


def _local_stack() -> dict[str, Any]:
    """The running stack's record, or a refusal: only ``up``'s clock can move."""
    stack = read_stack(get_settings().data_dir)
    if not stack.get("shiftable_clock"):
        fail(NOT_A_LOCAL_STACK)
    if stack.get("stopped"):
        fail(
            f"the local stack of {get_settings().data_dir.resolve()} is stopped: "
            "start it with `billing-worker up`"
        )
    return stack


def _seconds(duration: str) -> float:
    """DURATION in seconds; a malformed one is a wrong command line (exit status 2)."""
    from worker.local.start import require_emulator

    require_emulator()
    from stripe_emulator import parse_duration

    try:
        return parse_duration(duration)
    except ValueError as error:
        raise click.BadParameter(
            str(error), ctx=click.get_current_context(), param_hint="DURATION"
        ) from None


def _days(seconds: float) -> str:
    return f"{seconds / 86400:.2f} days"


@clock.command("advance", settings_env=REDIS_ENV)
@click.argument("duration")
def clock_advance(duration: str) -> None:
    """Move the application clock and the Stripe emulator's together by DURATION, e.g.
    `31d`, `2h`, `1d12h`, `90m`, `3600`."""
    seconds = _seconds(duration)  # says first if the emulator is not installed
    from stripe_emulator import EmulatorAdmin

    stack = _local_stack()
    # Stripe first: once the application's clock moves, beat may apply a change that fell
    # due, and the provider must already be in the new period when it does.
    emulator_url = stack.get("stripe_emulator_url")
    application = ShiftableClock(clock_client(stack_settings()))
    if emulator_url:
        # The emulator's offset is the stack's one (worker/local/stack_clock.py): the
        # application's becomes a copy of it, whatever it was.
        with EmulatorAdmin(str(emulator_url)) as emulator:
            emulator.advance_clock(seconds)
            offset = emulator.clock()["offset"]
        application.align(offset)
    else:
        offset = application.advance(seconds)
    click.echo(f"advanced {duration}; the clock is now {_days(offset)} ahead")


@clock.command("show", settings_env=REDIS_ENV)
@as_json_option
def clock_show(as_json: bool) -> None:
    """The clock's offset, the shifted now every process of the stack uses, real time, and
    the Stripe emulator's now (which moves with it)."""
    stack = read_stack(get_settings().data_dir)
    if not stack.get("shiftable_clock"):
        now = datetime.now(UTC)
        emit(
            as_json,
            {"offset_seconds": 0.0, "now": now.isoformat(), "real_now": now.isoformat()},
            f"real time: {now:%Y-%m-%d %H:%M:%S} UTC (this is not a local stack's clock)",
        )
        return
    _local_stack()
    offset = ShiftableClock(clock_client(stack_settings())).offset()
    real = datetime.now(UTC)
    shifted = real + timedelta(seconds=offset)
    emulator_now = _emulator_now(stack)
    view = {
        "offset_seconds": offset,
        "now": shifted.isoformat(),
        "real_now": real.isoformat(),
        "stripe_emulator_now": emulator_now.isoformat() if emulator_now else None,
    }
    lines = [
        f"offset     {offset:.0f}s ({_days(offset)} ahead)",
        f"now        {shifted:%Y-%m-%d %H:%M:%S} UTC   (what every process of the stack uses)",
        f"real time  {real:%Y-%m-%d %H:%M:%S} UTC",
    ]
    if emulator_now is not None:
        lines.append(f"stripe     {emulator_now:%Y-%m-%d %H:%M:%S} UTC   (the emulator's clock)")
    emit(as_json, view, "\n".join(lines))


def _emulator_now(stack: dict[str, Any]) -> datetime | None:
    url = stack.get("stripe_emulator_url")
    if not url or importlib.util.find_spec("stripe_emulator") is None:
        return None
    from stripe_emulator import EmulatorAdmin

    return datetime.fromtimestamp(EmulatorAdmin(str(url)).clock()["now"], UTC)


@clock.command("reset", settings_env=REDIS_ENV)
def clock_reset() -> None:
    """Bring the application clock and the Stripe emulator's back to real time. Data made
    while the clock was ahead keeps its times (a period that ends in a month of shifted time
    ends then); `billing-worker up --fresh` starts over without any."""
    from worker.local.start import require_emulator

    require_emulator()
    from stripe_emulator import EmulatorAdmin

    stack = _local_stack()
    shiftable = ShiftableClock(clock_client(stack_settings()))
    was = shiftable.offset()
    emulator_url = stack.get("stripe_emulator_url")
    if emulator_url:
        EmulatorAdmin(str(emulator_url)).reset_clock()
    shiftable.reset()
    click.echo(f"the clock is back to real time (it was {_days(was)} ahead)")
