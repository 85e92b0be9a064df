"""``billing-worker stripe fault add|list|clear``: make the Stripe emulator fail on purpose.

A command line over the emulator's admin API (``/_emulator/faults``, ``stripe_emulator/admin.py``;
the kinds and their effects, ``stripe_emulator/faults.py``), for an operator trying the failure
→ replay story on the local stack (``docs/how-to/console.md``), as the tests inject faults. The
emulator is the one ``up`` runs (``stack.json``), or the one ``BILLING_STRIPE_API_BASE`` names;
never Stripe itself, which has no faults to inject.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from worker.cli.base import (
    DATA_DIR,
    EXIT_UNAVAILABLE,
    BillingGroup,
    as_json_option,
    emit,
    fail,
    usage_error,
)
from worker.cli.stripe_account import stripe
from worker.cli.tables import echo_list
from worker.local.stack_state import read_stack, stack_settings
from worker.settings import get_settings

EmulatorAdmin = Any
"""``stripe_emulator.EmulatorAdmin``, named without importing it: the emulator is a
distribution of its own, absent from production, so no worker module needs it to load."""

FAULT_ENV = (DATA_DIR, "BILLING_STRIPE_API_BASE")
T = TypeVar("T")


@stripe.group("fault", cls=BillingGroup)
def stripe_fault() -> None:
    """Faults the Stripe emulator injects into the calls it answers (the local stack's, or
    the one BILLING_STRIPE_API_BASE names; never real Stripe): make a call fail on purpose,
    see what the system does, take the fault away."""


class EmulatorUnreachable(click.ClickException):
    """The emulator did not answer: the same command may work later."""

    exit_code = EXIT_UNAVAILABLE


def _emulator() -> EmulatorAdmin:
    """The admin client of the emulator in use, or one line saying there is none."""
    from worker.local.start import require_emulator

    require_emulator()
    from stripe_emulator import EmulatorAdmin as Admin

    settings = get_settings()
    stack = read_stack(settings.data_dir)
    if settings.stripe_api_base is None and stack.get("stopped"):
        fail(
            f"the local stack of {settings.data_dir.resolve()} is stopped, and its Stripe "
            "emulator with it: start it with `billing-worker up`"
        )
    base = stack_settings().stripe_api_base
    if not base:
        fail(
            "faults are the Stripe emulator's: no emulator here (start the local stack with "
            "`billing-worker up`, or set BILLING_STRIPE_API_BASE to an emulator's URL)"
        )
    return Admin(base.rstrip("/"))


def _asked(call: Callable[[EmulatorAdmin], T]) -> T:
    """``call`` on the emulator; its refusal, or its absence, as one line and an exit status:
    a rule it cannot hold is a wrong command line (2), an unknown fault id is refused (1),
    an emulator that does not answer is unreachable (3)."""
    import httpx

    from stripe_emulator import EmulatorAdminError

    emulator = _emulator()
    try:
        with emulator:
            return call(emulator)
    except EmulatorAdminError as error:
        said = str(error).partition(": ")[2] or str(error)
        if error.status == 404 and said.startswith("no fault"):
            fail(said)
        if error.status == 404:
            fail(f"no Stripe emulator answers at {emulator.base_url} (it answered 404)")
        usage_error(f"the Stripe emulator refused the fault: {said}")
    except httpx.HTTPError as error:
        raise EmulatorUnreachable(
            f"the Stripe emulator is unreachable at {emulator.base_url}: {error}"
        ) from None


def _what(rule: dict[str, Any]) -> str:
    """A rule in words: its kind, the calls it matches, how often."""
    times = "every time" if rule["count"] is None else f"{rule['count']} time(s)"
    extra = []
    if rule["kind"] == "latency":
        extra.append(f"{rule['latency_ms']} ms")
    if rule["kind"] == "hang":
        extra.append(f"{rule['hang_seconds']:g} s")
    if rule["after_execution"]:
        extra.append("after the call is carried out")
    if rule.get("replays"):
        extra.append("idempotent replays too")
    if rule["probability"] != 1:
        extra.append(f"with probability {rule['probability']:g}")
    described = ", ".join([times, *extra])
    return f"{rule['kind']} on {rule['match']}, {described}"


@stripe_fault.command("add", settings_env=FAULT_ENV)
@click.argument("kind")
@click.option(
    "--match",
    default="*",
    show_default=True,
    help="The calls it hits: a method and a path glob, e.g. 'POST /v1/customers', "
    "'* /v1/subscriptions/*', '/v1/prices*' (any method), or '*' (every call).",
)
@click.option(
    "--count",
    type=click.IntRange(min=1),
    default=None,
    help="Fire this many times, then stop [default: every time, until cleared].",
)
@click.option(
    "--latency-ms",
    type=click.IntRange(min=0),
    default=0,
    help="How long a latency fault waits (required for latency).",
)
@click.option(
    "--after-execution",
    is_flag=True,
    help="Act after Stripe carried the call out (api_error, service_unavailable, latency, "
    "drop, hang): the write happened, the caller does not know it.",
)
@click.option(
    "--replays",
    is_flag=True,
    help="Hit idempotent replays too (drop, api_error, service_unavailable): a fault of the "
    "network or of Stripe's edge loses a replay's answer as readily as a first answer's "
    "[default: a replay is answered before faults are considered].",
)
@click.option(
    "--probability",
    type=click.FloatRange(0, 1),
    default=1.0,
    show_default=True,
    help="The chance that a matching call is hit.",
)
@click.option(
    "--hang-seconds",
    type=click.FloatRange(0, 60, min_open=True),
    default=None,
    help="How long a hang fault holds the call [default: 60].",
)
@as_json_option
def stripe_fault_add(
    kind: str,
    match: str,
    count: int | None,
    latency_ms: int,
    after_execution: bool,
    replays: bool,
    probability: float,
    hang_seconds: float | None,
    as_json: bool,
) -> None:
    """Make the Stripe emulator answer the calls --match names with a KIND fault, and print
    the fault's id (`stripe fault clear ID` takes it away). A fault acts before the call is
    carried out (nothing written at Stripe) unless --after-execution says otherwise.

    \b
    Kinds (what a matching call gets):
      rate_limit           429 rate_limit (the SDK raises RateLimitError)
      lock_timeout         429 lock_timeout, Stripe-Should-Retry: true (the SDK
                           retries)
      api_error            500 api_error
      service_unavailable  503 api_error
      card_declined        402 card_error / card_declined
      latency              waits --latency-ms, then carries on (latencies add up)
      drop                 the connection closed without an answer
      hang                 no answer for --hang-seconds (at most 60), then closed
    """
    from worker.local.start import require_emulator

    require_emulator()
    from stripe_emulator.faults import KINDS

    if kind not in KINDS:
        raise click.BadParameter(
            f"{kind!r} is not a fault kind; one of {', '.join(KINDS)}",
            ctx=click.get_current_context(),
            param_hint="KIND",
        )
    fault = _asked(
        lambda emulator: emulator.add_fault(
            kind,
            match,
            count=count,
            latency_ms=latency_ms,
            after_execution=after_execution,
            probability=probability,
            hang_seconds=hang_seconds,
            replays=replays,
        )
    )
    rule = _rule(fault)
    emit(as_json, rule, f"{rule['id']}  {_what(rule)}")


def _rule(fault: Any) -> dict[str, Any]:
    import dataclasses

    view: dict[str, Any] = dataclasses.asdict(fault)
    return view


@stripe_fault.command("list", settings_env=FAULT_ENV)
@as_json_option
def stripe_fault_list(as_json: bool) -> None:
    """The faults the Stripe emulator holds, with how many times each fired."""
    rules = [_rule(fault) for fault in _asked(lambda emulator: emulator.faults())]
    if as_json:
        emit(True, rules, "")
        return
    echo_list(
        ("ID", "KIND", "MATCH", "FIRED", "LEFT", "WHAT"),
        [
            (
                rule["id"],
                rule["kind"],
                rule["match"],
                str(rule["fired"]),
                "-" if rule["count"] is None else str(max(0, rule["count"] - rule["fired"])),
                _what(rule),
            )
            for rule in rules
        ],
        empty="no faults: the emulator answers every call (billing-worker stripe fault add KIND)",
    )


@stripe_fault.command("clear", settings_env=FAULT_ENV)
@click.argument("fault_id", required=False)
def stripe_fault_clear(fault_id: str | None) -> None:
    """Take FAULT_ID away, or every fault when none is named (hung calls are let go)."""
    if fault_id is None:
        _asked(lambda emulator: emulator.clear_faults())
        click.echo("every fault cleared: the emulator answers every call")
        return
    _asked(lambda emulator: emulator.remove_fault(fault_id))
    click.echo(f"fault {fault_id} cleared")
