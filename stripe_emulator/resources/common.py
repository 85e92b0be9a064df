"""What every resource module shares: the endpoint contract, pagination and metadata rules."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from stripe_emulator.config import API_VERSION
from stripe_emulator.errors import invalid, resource_missing
from stripe_emulator.list_order import ListOrder
from stripe_emulator.objects import list_object
from stripe_emulator.params import UNSET, Obj
from stripe_emulator.state import Record, Store


@dataclass(slots=True)
class Ctx:
    """What a handler gets besides its parameters: the data, emulator time, path ids and the
    request's API version (``Stripe-Version``, else the emulator's)."""

    store: Store
    now: int
    path: dict[str, str] = field(default_factory=dict)
    version: str = API_VERSION


Handler = Callable[[Ctx, dict[str, Any]], Record]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One Stripe API operation.

    ``returns`` names the response's object type for ``expand[]`` (``customer``,
    ``list<price>``, ``search<customer>``, ``deleted``...). Handlers run synchronously and
    raise :class:`StripeError` for failures that happen during execution.
    """

    method: str
    template: str
    schema: Obj
    handler: Handler
    returns: str


def _record_id(record: Any) -> str:
    return str(record["id"])


def paginate(
    records: Sequence[T],
    params: dict[str, Any],
    url: str,
    kind: str,
    render: Callable[[T], Record] | None = None,
    ident: Callable[[T], str] = _record_id,
) -> Record:
    """A Stripe list object over ``records`` (already filtered, newest first).

    Implements ``limit`` (default 10), ``starting_after`` and ``ending_before``; a cursor that
    is not in the list is a 404 naming the cursor parameter, as Stripe answers. ``records`` are
    dicts with an ``id``, or anything ``ident`` gives an id for and ``render`` renders.
    """
    limit, after, before = _page_params(params)
    if after is not None:
        index = _index_of(records, after, kind, "starting_after", ident)
        window = records[index + 1 :]
        page = window[:limit]
    elif before is not None:
        index = _index_of(records, before, kind, "ending_before", ident)
        window = records[:index]
        page = window[-limit:]
    else:
        window = records
        page = window[:limit]
    data: list[Any] = [render(record) for record in page] if render else list(page)
    result = list_object(url, data, len(window) > limit)
    # Sent only when the client expands total_count (see expand.py), removed otherwise.
    result["total_count"] = len(records)
    return result


def paginate_in_order(
    records: dict[str, Record],
    order: ListOrder,
    params: dict[str, Any],
    url: str,
    kind: str,
    render: Callable[[Record], Record] | None = None,
) -> Record:
    """What ``paginate(newest_first(records), ...)`` answers, at a cost of O(limit) whatever
    the number of records: the page is read from ``order`` (``records``' ids in creation
    order) from its cursor's position instead of scanning for the cursor. For lists with no
    filter, the one path a client pages through every object by.

    An order found out of step with ``records`` (an object stored or deleted without it) is
    rebuilt first, so a missed update costs one O(n) page, never a wrong one.
    """
    limit, after, before = _page_params(params)
    if not order.matches(records):
        order.rebuild(records)
    if after is not None:
        _check_listed(order, after, kind, "starting_after")
        ids = order.older_than(after, limit + 1)
    elif before is not None:
        _check_listed(order, before, kind, "ending_before")
        # The nearest newer ones, nearest first: the page is the first ``limit``, newest first.
        ids = order.newer_than(before, limit + 1)
        ids = ids[:limit][::-1] + ids[limit:]
    else:
        ids = order.newest(limit + 1)
    page = [records[object_id] for object_id in ids[:limit]]
    data = [render(record) for record in page] if render else page
    result = list_object(url, data, len(ids) > limit)
    # Sent only when the client expands total_count (see expand.py), removed otherwise.
    result["total_count"] = len(records)
    return result


def _page_params(params: dict[str, Any]) -> tuple[int, str | None, str | None]:
    """``limit`` (default 10) and the one cursor given, if any."""
    limit: int = params.get("limit", 10)
    after: str | None = params.get("starting_after")
    before: str | None = params.get("ending_before")
    if after is not None and before is not None:
        raise invalid(
            "You may only specify one of these parameters: ending_before, starting_after.",
            "starting_after",
        )
    return limit, after, before


def _check_listed(order: ListOrder, object_id: str, kind: str, param: str) -> None:
    if order.position(object_id) is None:
        raise resource_missing(kind, object_id, param)


def _index_of(
    records: Sequence[T], object_id: str, kind: str, param: str, ident: Callable[[T], str]
) -> int:
    for index, record in enumerate(records):
        if ident(record) == object_id:
            return index
    raise resource_missing(kind, object_id, param)


def created_matches(created: int, bounds: dict[str, int] | None) -> bool:
    """Stripe's ``created`` list filter: an exact value or ``gt``/``gte``/``lt``/``lte``."""
    if bounds is None:
        return True
    return (
        bounds.get("eq", created) == created
        and created > bounds.get("gt", created - 1)
        and created >= bounds.get("gte", created)
        and created < bounds.get("lt", created + 1)
        and created <= bounds.get("lte", created)
    )


def newest_first(records: dict[str, Record]) -> list[Record]:
    """Records in Stripe's list order (insertion order is creation order)."""
    return list(reversed(records.values()))


def metadata_for_create(raw: Any) -> dict[str, str]:
    """Metadata given on create: empty values (and ``metadata=""``) set nothing."""
    if raw is None or raw is UNSET:
        return {}
    return {key: value for key, value in raw.items() if value is not UNSET}


def metadata_for_update(current: dict[str, str], raw: Any) -> dict[str, str]:
    """Stripe's update rule: keys merge, ``metadata[k]=""`` removes k, ``metadata=""`` clears."""
    if raw is UNSET:
        return {}
    merged = dict(current)
    for key, value in raw.items():
        if value is UNSET:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def lookup(records: dict[str, Record], object_id: str, kind: str, param: str = "id") -> Record:
    record = records.get(object_id)
    if record is None:
        raise resource_missing(kind, object_id, param)
    return record


def only_one_of(params: dict[str, Any], *names: str) -> None:
    given = [name for name in names if name in params]
    if len(given) > 1:
        raise invalid(
            f"You may only specify one of these parameters: {', '.join(given)}.", given[1]
        )
