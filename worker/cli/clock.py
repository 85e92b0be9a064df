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
from typing import TYPE_CHECKING, Any

import click

from adapters.clock import ShiftableClock, clock_client
from worker.cli.audited import audited_options, command_help, take_action
from worker.cli.base import (
    DATABASE_ENV,
    REDIS_ENV,
    BillingGroup,
    as_json_option,
    emit,
    fail,
    services,
)
from worker.local.stack_clock import NOT_A_LOCAL_STACK
from worker.local.stack_state import read_stack, stack_settings
from worker.settings import get_settings

if TYPE_CHECKING:
    from worker.bootstrap import Services

MOVE_ENV = (*DATABASE_ENV, *REDIS_ENV)
"""A move of the clock is kept in the audit trail, in the database."""


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


def _with_clock(stack: dict[str, Any]) -> Services:
    """The services, handed the running stack's clock (its emulator's and its Redis's)."""
    from worker.local.stack_clock import EmulatorStackClock

    svc = services()
    url = stack.get("stripe_emulator_url")
    svc.local_clock = EmulatorStackClock(svc.settings, str(url) if url else None)
    return svc


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


@clock.command(
    "advance",
    settings_env=MOVE_ENV,
    help=command_help("advance-clock", "DURATION: e.g. `31d`, `2h`, `1d12h`, `90m`, `3600`."),
    short_help="Move the application clock and the Stripe emulator's together by DURATION.",
)
@click.argument("duration")
@audited_options("advance-clock")
@as_json_option
def clock_advance(duration: str, reason: str, operator: str, as_json: bool) -> None:
    from application.operator_actions import LOCAL_CLOCK, action

    seconds = _seconds(duration)  # says first if the emulator is not installed
    stack = _local_stack()
    moved = take_action(
        "advance-clock",
        _with_clock(stack),
        [LOCAL_CLOCK],
        reason,
        operator,
        {"seconds": seconds, "duration": duration},
    )
    taken = action("advance-clock")
    emit(as_json, taken.view(moved), taken.said(moved))


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


@clock.command(
    "reset",
    settings_env=MOVE_ENV,
    help=command_help("reset-clock", "`billing-worker up --fresh` starts over without any data."),
    short_help="Bring the application clock and the Stripe emulator's back to real time.",
)
@audited_options("reset-clock")
@as_json_option
def clock_reset(reason: str, operator: str, as_json: bool) -> None:
    from application.operator_actions import LOCAL_CLOCK, action
    from worker.local.start import require_emulator

    require_emulator()
    stack = _local_stack()
    moved = take_action("reset-clock", _with_clock(stack), [LOCAL_CLOCK], reason, operator)
    taken = action("reset-clock")
    emit(as_json, taken.view(moved), taken.said(moved))
