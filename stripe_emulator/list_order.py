"""Stripe's list order of one kind of object, kept so that a page costs O(limit), not O(all).

Stripe lists newest first, and the emulator's records are dicts in insertion order, which is
creation order: objects created in the same second are listed last-created first (see
:func:`stripe_emulator.resources.common.newest_first`). A dict cannot be read from the middle,
so finding a page's cursor in it means walking every record before it; at a million objects
that is about a second a page. :class:`ListOrder` keeps the same ids in a list, with each id's
position in it, so a page is found by its cursor's position and read off by walking from there.

A deleted id leaves a hole (``None``) rather than shifting every later position; the holes are
squeezed out once they are half the list, so a walk over holes stays bounded by the deletions
since then (customers are the only listed objects that are deleted).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class ListOrder:
    """The ids of one kind of object in creation order (oldest first), with their positions.

    The owner adds each id when it stores the object and removes it when it forgets the
    object; :meth:`matches` tells a reader whether that was kept up with the dict it orders.
    """

    __slots__ = ("_holes", "_ids", "_positions")

    def __init__(self, ids: Iterable[str] = ()) -> None:
        self._ids: list[str | None] = []
        self._positions: dict[str, int] = {}
        self._holes = 0
        self.rebuild(ids)

    def rebuild(self, ids: Iterable[str]) -> None:
        """Start again from ``ids``, oldest first."""
        listed = list(ids)
        self._ids = list(listed)
        self._positions = {object_id: position for position, object_id in enumerate(listed)}
        self._holes = 0

    def __len__(self) -> int:
        return len(self._positions)

    def add(self, object_id: str) -> None:
        """Append a newly created object's id (the newest)."""
        self._positions[object_id] = len(self._ids)
        self._ids.append(object_id)

    def remove(self, object_id: str) -> None:
        """Forget an id (no-op if unknown)."""
        position = self._positions.pop(object_id, None)
        if position is None:
            return
        self._ids[position] = None
        self._holes += 1
        if self._holes * 2 > len(self._ids):
            self.rebuild(object_id for object_id in self._ids if object_id is not None)

    def matches(self, records: dict[str, Any]) -> bool:
        """Whether this order holds exactly ``records``' keys, as far as O(1) can tell: the same
        number and the same newest. Catches a record stored or deleted without telling the
        order; the reader then rebuilds it."""
        if len(self._positions) != len(records):
            return False
        if not records:
            return True
        newest = next(reversed(records))
        position = self._positions.get(newest)
        return position is not None and self._newer_than(position, 1) == []

    def position(self, object_id: str) -> int | None:
        """Where ``object_id`` is (larger is newer), or ``None`` if it is not listed."""
        return self._positions.get(object_id)

    def newest(self, count: int) -> list[str]:
        """Up to ``count`` ids, newest first."""
        return self._older_than(len(self._ids), count)

    def older_than(self, object_id: str, count: int) -> list[str]:
        """Up to ``count`` ids created before ``object_id`` (which must be listed), newest
        first: the page after it."""
        return self._older_than(self._positions[object_id], count)

    def newer_than(self, object_id: str, count: int) -> list[str]:
        """Up to ``count`` ids created after ``object_id`` (which must be listed), the nearest
        first (so oldest first): the page before it, reversed."""
        return self._newer_than(self._positions[object_id], count)

    def _older_than(self, position: int, count: int) -> list[str]:
        found: list[str] = []
        ids = self._ids
        position -= 1
        while position >= 0 and len(found) < count:
            object_id = ids[position]
            if object_id is not None:
                found.append(object_id)
            position -= 1
        return found

    def _newer_than(self, position: int, count: int) -> list[str]:
        found: list[str] = []
        ids = self._ids
        end = len(ids)
        position += 1
        while position < end and len(found) < count:
            object_id = ids[position]
            if object_id is not None:
                found.append(object_id)
            position += 1
        return found
