"""Claiming due rows for one sweep at a time: the one place the ``SKIP LOCKED`` claim is
written (plan changes at their time, webhook deliveries at their attempt).

Two steps in the caller's transaction:

1. select the candidates, oldest first, ``FOR UPDATE SKIP LOCKED``: on PostgreSQL a row
   another sweep holds is skipped, never waited on; SQLite has no row locks, so this is a
   plain read and two sweeps may pick the same candidates;
2. update them to ``state`` with a lease, checking the claimable condition again row by row
   under the write lock, and ``RETURNING`` the rows this sweep got with their claim number:
   a candidate another sweep claimed meanwhile no longer matches and is not returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.orm import Session


def claim_due_rows(
    session: Session,
    table: Any,
    *,
    claimable: ColumnElement[bool],
    order_by: Sequence[Any],
    limit: int,
    state: str,
    lease_until: datetime,
    now: datetime,
) -> list[tuple[str, int]]:
    """Claim up to ``limit`` rows of ``table`` (a mapped class with ``id``, ``state``,
    ``claims``, ``lease_until`` and ``updated_at``) that are ``claimable``: each goes to
    ``state`` until ``lease_until``. Returns ``(id, claim number)`` of the rows claimed."""
    candidates = session.scalars(
        select(table.id)
        .where(claimable)
        .order_by(*order_by)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    if not candidates:
        return []
    claimed = session.execute(
        update(table)
        .where(table.id.in_(candidates), claimable)
        .values(state=state, claims=table.claims + 1, lease_until=lease_until, updated_at=now)
        .returning(table.id, table.claims)
        .execution_options(synchronize_session=False)
    ).all()
    return [(str(row_id), int(number)) for row_id, number in claimed]
