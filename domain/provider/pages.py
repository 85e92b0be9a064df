"""The provider's lists read a page at a time (issue 46): a page's objects and where the list
resumes after it, and the state of beat's walk over a list, kept between its runs.

A full reconciliation of a million subscriptions is bounded by Stripe's read rate (100 reads a
second live): read one object per call it is a million reads; read in pages of a hundred it is
ten thousand. The reconciliation sweep (``application/handlers/provider/reconcile.py``) walks
Stripe's lists, newest first, a few pages per run, and keeps its place in a
:class:`ProviderWalk`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class ListedPage(Generic[T]):
    """One page of a provider's list, in the list's order (Stripe's: newest first)."""

    objects: tuple[T, ...]
    after: str | None
    """The cursor to resume from: the id of the page's last object (``None``: an empty
    page). The next page is the one after it."""
    has_more: bool
    """Whether the list goes on after this page."""


class WalkedList(StrEnum):
    """The provider's lists the reconciliation sweep walks."""

    CUSTOMERS = "customers"
    SUBSCRIPTIONS = "subscriptions"


@dataclass
class ProviderWalk:
    """Where the reconciliation sweep stands in one of the provider's lists.

    A pass reads the list from its first page to its last, one page after another over many
    runs; the next pass starts again from the first. What a completed pass did not show (a
    row read before the pass began and not since) is not at the provider any more, or was
    made after the pass went by: the sweep reads those rows one by one.
    """

    id: WalkedList
    after: str | None = None
    """The cursor the next page starts after; ``None``: the next page is a pass's first."""
    pass_started_at: datetime | None = None
    """When the first page of the pass under way was read (``None``: none under way)."""
    completed_pass_started_at: datetime | None = None
    """When the last completed pass began: a row not read since is one it did not show."""
    updated_at: datetime | None = None

    def page_read(self, page: ListedPage[object], read_at: datetime) -> None:
        """Move past ``page``, whose read began at ``read_at``; the list's last page
        completes the pass, and the next page read starts a new one."""
        if self.pass_started_at is None:
            self.pass_started_at = read_at
        if page.has_more and page.after is not None:
            self.after = page.after
        else:
            self.completed_pass_started_at = self.pass_started_at
            self.after = None
            self.pass_started_at = None
        self.updated_at = read_at

    def restart(self, now: datetime) -> None:
        """Give up the pass under way (its cursor is gone at the provider: a deleted
        customer); the next page read starts a new pass."""
        self.after = None
        self.pass_started_at = None
        self.updated_at = now
