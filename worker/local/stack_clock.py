"""The local stack's one clock offset: the Stripe emulator's.

Both modes of ``up`` start the same emulator on the same state file (``stripe-emulator.json``
in the data directory, its clock's offset included), while each keeps its Redis data apart:
one server's in ``redis/``, ``--ha``'s primary and replica's in ``redis-ha/``. So the
emulator's offset is the one both modes read, and the one the provider's periods, invoices and
renewals were made on; the application's offset in Redis (``adapters/clock.py``: every process
reads it there, twice a second, without a call to the emulator) is a copy of it. ``up`` writes
that copy before any process of the stack starts (:func:`align_with_emulator`), and ``clock
advance`` writes it after moving the emulator, so that the two clocks agree whichever Redis
the stack runs on, even one whose data is older or newer than the emulator's.
"""

from __future__ import annotations

from dataclasses import dataclass

from worker.settings import Settings

DAY_SECONDS = 86_400.0


@dataclass(frozen=True)
class Aligned:
    """The offset the stack runs on, and the one its Redis held before."""

    offset: float
    was: float

    @property
    def changed(self) -> bool:
        return abs(self.offset - self.was) >= 1.0

    def explained(self) -> str:
        """One line saying that the application's offset was brought to the emulator's."""
        return (
            f"the clock: {self.offset / DAY_SECONDS:.2f} days ahead of real time, as the Stripe "
            f"emulator's (this Redis's data had {self.was / DAY_SECONDS:.2f} days)"
        )


def align_with_emulator(settings: Settings, emulator_url: str) -> Aligned:
    """Write the emulator's offset as the application's, in the Redis of ``settings``, once
    the emulator answers."""
    from adapters.clock import ShiftableClock, clock_client
    from stripe_emulator import EmulatorAdmin

    with EmulatorAdmin(emulator_url) as emulator:
        emulator.wait_until_ready(30)
        offset = float(emulator.clock()["offset"])
    was = ShiftableClock(clock_client(settings)).align(offset)
    return Aligned(offset, was)


def clock_offset(settings: Settings) -> float:
    """The application's offset, as the stack's processes read it."""
    from adapters.clock import ShiftableClock, clock_client

    return ShiftableClock(clock_client(settings)).offset()


NOT_A_LOCAL_STACK = (
    "the clock can only move on a local stack started by `up` with the Stripe emulator"
)


class EmulatorStackClock:
    """The local stack's clock (``domain.ports.application.StackClock``): the Stripe
    emulator's offset first, then the application's copy of it in Redis; the application's
    alone on a stack without the emulator."""

    def __init__(self, settings: Settings, emulator_url: str | None) -> None:
        from adapters.clock import ShiftableClock, clock_client

        self._application = ShiftableClock(clock_client(settings))
        self._emulator_url = emulator_url

    def offset(self) -> float:
        return self._application.offset()

    def advance(self, seconds: float) -> float:
        # Stripe first: once the application's clock moves, beat may apply a change that fell
        # due, and the provider must already be in the new period when it does.
        if not self._emulator_url:
            return self._application.advance(seconds)
        from stripe_emulator import EmulatorAdmin

        # The emulator's offset is the stack's one: the application's becomes a copy of it,
        # whatever it was.
        with EmulatorAdmin(self._emulator_url) as emulator:
            emulator.advance_clock(seconds)
            offset = float(emulator.clock()["offset"])
        self._application.align(offset)
        return offset

    def reset(self) -> None:
        if self._emulator_url:
            from stripe_emulator import EmulatorAdmin

            with EmulatorAdmin(self._emulator_url) as emulator:
                emulator.reset_clock()
        self._application.reset()
