"""The console's home page: what an operator looks at first. Queues and their depth, the
commands in flight, what failed or was rejected in the last day, the accounts stuck
``pending``, the drift the database shows, the sweeps' last success, and the clock. Figures
are read as beat's gauges read them (``Services.queue_depths``, ``Services.system_figures``),
the sweeps' successes as the workers record them (``Services.sweep_successes``), and each
list from the console's reads (``ConsoleQueries``).

Two clocks show here. The application's (``Services.clock``: on the local stack, real time
plus the offset ``clock advance`` moves) stamps every row, so the lists and the page's clock
are on it. The sweeps run on real time (beat schedules them every so many real seconds) and
their successes are recorded on the workers' wall clock, as the metric that alerts on them is:
a sweep's health is judged against real time, so that moving the application's clock by a
month does not make every sweep look a month late."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from domain.operations.console import (
    IN_FLIGHT_STATUSES,
    CommandPage,
    CommandView,
    duration,
)
from worker.api.console.access import Viewer
from worker.api.console.layout import (
    PREFIX,
    badge,
    link,
    page,
    section,
    table,
    text,
    url,
    when,
)
from worker.api.console.search import search_form
from worker.api.console.timeline import command_link
from worker.api.state import State
from worker.bootstrap import Services

logger = logging.getLogger(__name__)
router = APIRouter()
T = TypeVar("T")

FAILURES = f"{PREFIX}/failures"
"""The failed and rejected commands, dead letters and drift, with their actions (its own
page module)."""
LAST_DAY = timedelta(days=1)
SHOWN = 20


def _read(part: str, read: Callable[[], T]) -> T | None:
    """What ``read`` answers, or ``None`` (and a log line) when that part cannot be read: the
    page still shows the others."""
    try:
        return read()
    except Exception:
        logger.warning("console: could not read the %s", part, exc_info=True)
        return None


def _card(label: str, figure: object, href: str | None = None, *, alert: bool = False) -> str:
    shown = text(figure) if href is None else link(href, figure)
    return (
        f'<div class="card{" alert" if alert else ""}"><span class="figure">{shown}</span>'
        f'<span class="label">{text(label)}</span></div>'
    )


def _count(page_read: CommandPage | None) -> str:
    if page_read is None:
        return "?"
    more = "+" if page_read.next_cursor else ""
    return f"{len(page_read.items)}{more}"


def _command_rows(commands: list[CommandView]) -> list[list[str]]:
    return [
        [
            command_link(command.id),
            text(command.type),
            badge(command.status),
            text(command.attempts),
            when(command.updated_at),
            when(command.next_retry_at),
            text(command.last_error),
        ]
        for command in commands
    ]


COMMAND_HEADERS = ("Command", "Type", "Status", "Attempts", "Updated", "Next retry", "Last error")


STALLED_INTERVALS = 3
"""A sweep that has not succeeded for this many of its intervals is shown stalled (as the
alert ``BillingSweepStalled`` would fire)."""


def _sweeps(svc: Services, real_now: datetime) -> str:
    """Each sweep's last success and verdict, judged against ``real_now``: the wall clock
    the successes were recorded on (the module's docstring)."""
    from adapters.messaging.config import SWEEPS
    from adapters.observability.sweeps import schedule_intervals

    successes = _read("sweeps' last successes", lambda: svc.sweep_successes().read())
    if successes is None:
        return '<p class="empty">Redis could not be read</p>'
    intervals = schedule_intervals(svc.celery_app().conf.beat_schedule or {}, SWEEPS)
    rows = []
    for sweep in sorted(SWEEPS):
        last, interval = successes.get(sweep), intervals.get(sweep)
        age = None if last is None else max(0.0, (real_now - last).total_seconds())
        late = age is not None and interval is not None and age > STALLED_INTERVALS * interval
        # Never recorded: not run since Redis's data began (an hourly sweep on a new stack).
        verdict = "not yet" if age is None else "stalled" if late else "ok"
        rows.append(
            [
                text(sweep),
                text(duration(interval)),
                when(last) or "never",
                text(duration(age)),
                badge(verdict),
            ]
        )
    headers = ("Sweep", "Every", "Last success (real time)", "Ago", "")
    return table(headers, rows, "no sweeps")


SHIFTED_AFTER_SECONDS = 1.0
"""How far ahead of real time the application's clock must be to be called shifted (it is
read a moment before real time is)."""


def _clock_line(now: datetime, real_now: datetime) -> str:
    """The application's clock, and how far ahead of real time it is when shifted."""
    ahead = (now - real_now).total_seconds()
    if ahead < SHIFTED_AFTER_SECONDS:
        return f'<p class="clock">The clock: {when(now)} UTC (real time)</p>'
    return (
        f'<p class="clock shifted">The clock: {when(now)} UTC, shifted '
        f"{ahead / 86400:.2f} days ahead of real time ({when(real_now)} UTC) by "
        "<code>billing-worker clock advance</code>; the sweeps are timed in real time</p>"
    )


def overview(svc: Services) -> str:
    """The home page's body."""
    now = svc.clock.now()
    real_now = datetime.now(UTC)  # the sweeps' clock (the module's docstring)
    console = svc.console()
    depths = _read("queues", lambda: svc.queue_depths()())
    figures = _read("database figures", lambda: svc.system_figures()(now))
    in_flight = _read(
        "commands in flight",
        lambda: console.commands(
            statuses=IN_FLIGHT_STATUSES, command_type=None, limit=SHOWN, after=None
        ),
    )
    since = now - LAST_DAY

    def recent(status: str) -> tuple[int, list[CommandView]]:
        return console.recent_commands(status=status, updated_since=since, shown=SHOWN)

    failed = _read("failed commands", lambda: recent("failed"))
    rejected = _read("rejected commands", lambda: recent("rejected"))
    pending = _read(
        "pending accounts",
        lambda: console.billing_accounts(state="pending", org_id=None, limit=SHOWN, after=None),
    )
    failed_count, rejected_count = (
        "?" if read is None else str(read[0]) for read in (failed, rejected)
    )
    cards = [
        _card("failed in the last day", failed_count, FAILURES, alert=failed_count != "0"),
        _card("rejected in the last day", rejected_count, f"{FAILURES}?status=rejected"),
        _card("commands in flight", _count(in_flight)),
    ]
    if figures is not None:
        oldest = figures.oldest_pending_account
        cards.append(
            _card(
                "accounts pending"
                + (
                    ""
                    if oldest is None
                    else f", oldest for {duration((now - oldest).total_seconds())}"
                ),
                figures.pending_accounts,
                url("accounts", state="pending"),
                alert=figures.pending_accounts > 0,
            )
        )
        off_plan = sum(figures.subscriptions_off_plan.values())
        cards.append(
            _card(
                "subscriptions off their plan (drift)",
                off_plan,
                f"{FAILURES}#drift",
                alert=off_plan > 0,
            )
        )
        cards.append(
            _card(
                "periods billed at the wrong price (renewals)",
                figures.renewals_billed_wrong,
                f"{FAILURES}#drift",
                alert=figures.renewals_billed_wrong > 0,
            )
        )
        cards.append(
            _card("failed commands waiting for an operator", figures.failed_commands, FAILURES)
        )
    body = [
        _clock_line(now, real_now),
        search_form(),
        f'<div class="cards">{"".join(cards)}</div>',
    ]
    queue_rows = [[text(queue), text(depth)] for queue, depth in sorted((depths or {}).items())]
    body.append(
        section(
            "Queues",
            table(("Queue", "Messages waiting"), queue_rows, "the broker could not be read")
            if depths is not None
            else '<p class="empty">the broker could not be read</p>',
            id="queues",
        )
    )
    body.append(section("Sweeps", _sweeps(svc, real_now), id="sweeps"))
    if figures is not None:
        changes = [
            [badge(state), text(count)] for state, count in sorted(figures.changes_by_state.items())
        ]
        body.append(
            section(
                "Plan changes by state",
                table(("State", "Changes"), changes, "no plan changes"),
                id="changes",
            )
        )
    body.append(
        section(
            "Commands in flight",
            table(COMMAND_HEADERS, _command_rows(in_flight.items if in_flight else []), "none"),
            id="in-flight",
        )
    )
    body.append(
        section(
            "Failed in the last day",
            table(COMMAND_HEADERS, _command_rows(failed[1] if failed else []), "none")
            + f'<p class="pager">{link(FAILURES, "Every failure, and what to do about it")}</p>',
            id="failed",
        )
    )
    account_rows = [
        [
            link(url("accounts", account.id), account.id),
            link(url("accounts", account.org_id), account.org_id),
            badge(account.state),
            when(account.created_at),
        ]
        for account in (pending.items if pending else [])
    ]
    body.append(
        section(
            "Accounts stuck pending",
            table(("Account", "Organization", "State", "Created"), account_rows, "none"),
            id="pending",
        )
    )
    return "".join(body)


@router.get(PREFIX)
def home_page(caller: Viewer, state: State) -> HTMLResponse:
    return page("Overview", overview(state.svc), nav="home")
