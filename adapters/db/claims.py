"""Claiming due rows for one sweep at a time: the one place the ``SKIP LOCKED`` claim is
written (plan changes at their time, webhook deliveries at their attempt).

In the caller's transaction, an ``UPDATE`` of the candidates to ``state`` with a lease,
``RETURNING`` the rows this sweep got with their claim number, where

1. the candidates are selected oldest first, ``FOR UPDATE SKIP LOCKED``: on PostgreSQL a row
   another sweep holds is skipped, never waited on; SQLite has no row locks, so there this
   is a plain read and two sweeps may pick the same candidates;
2. the claimable condition is checked again row by row as each is updated, under the write
   lock: a candidate another sweep claimed meanwhile no longer matches and is not returned.

On PostgreSQL the candidates are the update's subquery: one statement, one round trip, and
their ids never travel to the client and back. On SQLite they are read first, and the update
is sent only when there are some: an ``UPDATE`` takes the database's one write lock even when
it matches nothing, which a sweep finding nothing due (most of them) would take every second.
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
    candidates = (
        select(table.id)
        .where(claimable)
        .order_by(*order_by)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    if session.get_bind().dialect.name == "sqlite":
        ids = session.scalars(candidates).all()
        if not ids:
            return []
        chosen: Any = table.id.in_(ids)
    else:
        # A CTE, evaluated once whatever the plan (a subquery under ``IN`` may be run again
        # by the planner's join, and pick other rows the second time).
        chosen = table.id.in_(select(candidates.cte("candidates").c.id))
    claimed = session.execute(
        update(table)
        .where(chosen, claimable)
        .values(state=state, claims=table.claims + 1, lease_until=lease_until, updated_at=now)
        .returning(table.id, table.claims)
        .execution_options(synchronize_session=False)
    ).all()
    return [(str(row_id), int(number)) for row_id, number in claimed]
