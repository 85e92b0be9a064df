"""One timeline of commands, Stripe calls and events, oldest first, as an account's and a
subscription's pages show it; runs of routine syncs folded into one line.

Stripe's webhooks and beat's reconciliation re-read an account's customer and subscriptions
often (``stripe.sync_object``: a command, its ``get_customer`` or ``get_subscription`` call,
its success). Told one by one they bury what an operator looks for, so consecutive syncs that
succeeded are shown as one line, "synced N times, first … last …". A sync that has not
succeeded (failed, retrying, still running), or anything else between two syncs, ends the run
and is shown as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from domain.operations.audit import AuditEntry
from domain.operations.console import CommandView, EventView, ProviderCallView
from worker.api.console.layout import badge, link, text, url, when

SYNC_COMMAND = "stripe.sync_object"
SYNC_READS = frozenset({"get_customer", "get_subscription"})
"""The Stripe calls a sync makes: reads of the object it syncs."""


@dataclass(frozen=True)
class Entry:
    """A line of the timeline: when, its cells, and the sync it is part of (the sync
    command's id, or the read's own id when it ran outside one), if it is a routine sync."""

    at: str
    cells: list[str]
    sync: str | None = None


def command_link(command_id: str) -> str:
    return f"<code>{link(url('commands', command_id), command_id)}</code>"


def _command_entries(command: CommandView) -> list[Entry]:
    syncing = command.type == SYNC_COMMAND and command.status == "succeeded"
    entries = [
        Entry(
            command.created_at.isoformat(),
            [
                when(command.created_at),
                "command",
                f"{command_link(command.id)} {text(command.type)} ({text(command.source)})",
                "",
            ],
            command.id if syncing else None,
        )
    ]
    if command.status != "queued" or command.updated_at != command.created_at:
        outcome = f"{badge(command.status)}, {text(command.attempts)} attempt(s)"
        if command.next_retry_at is not None:
            outcome += f"; next retry {when(command.next_retry_at)}"
        entries.append(
            Entry(
                command.updated_at.isoformat(),
                [
                    when(command.updated_at),
                    "command",
                    f"{command_link(command.id)} {outcome}",
                    text(command.last_error),
                ],
                command.id if syncing else None,
            )
        )
    return entries


def _call_entry(call: ProviderCallView, unsuccessful: set[str]) -> Entry:
    what = f"{text(call.operation)} attempt {text(call.attempt)}: {badge(call.outcome)}"
    if call.idempotency_key:
        what += f" key <code>{text(call.idempotency_key)}</code>"
    if call.command_id:
        what += f" for {command_link(call.command_id)}"
    detail = text(call.error) + f" ({call.duration_ms} ms)"
    routine = (
        call.operation in SYNC_READS
        and call.outcome == "succeeded"
        and call.command_id not in unsuccessful
    )
    return Entry(
        call.at.isoformat(),
        [when(call.at), "stripe", what, detail],
        (call.command_id or f"call:{call.id}") if routine else None,
    )


def _event_entry(event: EventView) -> Entry:
    published = "published" if event.published_at else "not yet published"
    what = f"{text(event.type)} <code>{text(event.id)}</code>"
    if event.command_id:
        what += f" by {command_link(event.command_id)}"
    return Entry(event.occurred_at.isoformat(), [when(event.occurred_at), "event", what, published])


def folded(entries: list[Entry]) -> list[list[str]]:
    """The entries' cells in order, each run of two syncs or more as one line."""
    rows: list[list[str]] = []
    run: list[Entry] = []

    def close_run() -> None:
        syncs = {entry.sync for entry in run}
        if len(syncs) < 2:
            rows.extend(entry.cells for entry in run)
        else:
            first, last = run[0].at, run[-1].at
            rows.append(
                [
                    when(first),
                    "syncs",
                    f"synced {len(syncs)} times, first {when(first)} last {when(last)}",
                    "each re-read the object at Stripe and succeeded",
                ]
            )
        run.clear()

    for entry in entries:
        if entry.sync is None:
            close_run()
            rows.append(entry.cells)
        else:
            run.append(entry)
    close_run()
    return rows


def _audit_entry(entry: AuditEntry) -> Entry:
    what = (
        f"{text(entry.action)} by <strong>{text(entry.operator)}</strong> "
        f"({text(entry.surface)}) on {text(' '.join(entry.targets))}"
    )
    return Entry(
        entry.at.isoformat(), [when(entry.at), "operator", what, f"why: {text(entry.reason)}"]
    )


def timeline_rows(
    commands: list[CommandView],
    calls: list[ProviderCallView],
    events: list[EventView],
    audit: Sequence[AuditEntry] = (),
) -> list[list[str]]:
    """The rows of the timeline of ``commands``, ``calls``, ``events`` and operators'
    actions (``audit``), oldest first, consecutive routine syncs folded."""
    entries = [_audit_entry(entry) for entry in audit]
    entries += [entry for command in commands for entry in _command_entries(command)]
    unsuccessful = {command.id for command in commands if command.status != "succeeded"}
    entries += [_call_entry(call, unsuccessful) for call in calls]
    entries += [_event_entry(event) for event in events]
    return folded(sorted(entries, key=lambda entry: entry.at))
