"""The console's timeline (``worker/api/console/timeline.py``): consecutive routine syncs of
an account are one line; a failed sync, or anything else between syncs, is shown as it is."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from domain.operations.console import CommandView, EventView, ProviderCallView
from worker.api.console.timeline import timeline_rows

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def sync(command_id: str, minute: int, status: str = "succeeded") -> CommandView:
    return CommandView(
        id=command_id,
        type="stripe.sync_object",
        status=status,
        source="webhook",
        attempts=1,
        created_at=at(minute),
        updated_at=at(minute) + timedelta(seconds=2),
        finished_at=at(minute) + timedelta(seconds=2),
        last_error=None if status == "succeeded" else "stripe get customer: 503",
        next_retry_at=None,
        retries=0,
    )


def read(
    call_id: int, command_id: str, minute: int, outcome: str = "succeeded"
) -> ProviderCallView:
    return ProviderCallView(
        id=call_id,
        at=at(minute) + timedelta(seconds=1),
        operation="get_customer",
        subject="provider_customer:cus_1",
        command_id=command_id,
        idempotency_key=None,
        attempt=1,
        outcome=outcome,
        error=None,
        duration_ms=5,
    )


def event(minute: int) -> EventView:
    return EventView(
        id=f"evt_{minute:032d}",
        type="billing_account.customer_deleted",
        occurred_at=at(minute),
        command_id=None,
        subject="billing_account:ba_1",
        published_at=None,
        data={},
    )


def plain(row: list[str]) -> str:
    return re.sub(r"<[^>]+>", "", " ".join(row))


def test_consecutive_syncs_are_one_line_saying_how_many_and_when_the_first_and_last_ran() -> None:
    commands = [sync(f"cmd_s{n}", n) for n in range(4)]
    calls = [read(n, f"cmd_s{n}", n) for n in range(4)]

    rows = timeline_rows(commands, calls, [])

    assert len(rows) == 1
    assert "synced 4 times, first 2026-11-02 09:00:00 last 2026-11-02 09:03:02" in plain(rows[0])


def test_an_event_between_syncs_splits_the_run_and_a_lone_sync_is_told_in_full() -> None:
    commands = [sync("cmd_s0", 0), sync("cmd_s1", 1), sync("cmd_s5", 5)]
    calls = [read(0, "cmd_s0", 0), read(1, "cmd_s1", 1), read(5, "cmd_s5", 5)]

    rows = [plain(row) for row in timeline_rows(commands, calls, [event(3)])]

    assert "synced 2 times" in rows[0]
    assert "customer_deleted" in rows[1]
    assert [row for row in rows[2:] if "cmd_s5" in row] == rows[2:]  # created, read, succeeded
    assert len(rows) == 5


def test_a_failed_sync_is_never_folded_away() -> None:
    commands = [sync("cmd_s0", 0), sync("cmd_s1", 1, status="failed"), sync("cmd_s2", 2)]
    calls = [read(0, "cmd_s0", 0), read(1, "cmd_s1", 1, "retryable"), read(2, "cmd_s2", 2)]

    rows = [plain(row) for row in timeline_rows(commands, calls, [])]

    assert not any("synced" in row for row in rows)
    assert any("cmd_s1" in row and "failed" in row for row in rows)
    assert any("retryable" in row for row in rows)
