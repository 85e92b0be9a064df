"""Reading events: ``GET /v1/events`` and ``GET /v1/events/{id}``.

The list is newest first and filters on ``type`` (an event type, or a group with ``*`` as a
wildcard: ``customer.*``), ``types[]`` (up to 20 exact types; not together with ``type``),
``created`` (a timestamp or ``gt``/``gte``/``lt``/``lte``) and ``delivery_success``
(``true``: every webhook endpoint answered with a 2xx; ``false``: some delivery is pending or
was given up), with the usual pagination. What is recorded and when:
:mod:`stripe_emulator.recorder`.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from stripe_emulator.errors import resource_missing
from stripe_emulator.events import Event, render
from stripe_emulator.params import PAGINATION, Arr, Bool, Range, Str, schema
from stripe_emulator.resources.common import Ctx, Endpoint, created_matches, only_one_of, paginate
from stripe_emulator.state import Record

LIST = schema(
    {
        "created": Range(),
        "delivery_success": Bool(),
        "type": Str(),
        "types": Arr(Str(), max_items=20),
        **PAGINATION,
    }
)
RETRIEVE = schema({})


def _ident(event: Event) -> str:
    return event.id


def list_(ctx: Ctx, params: dict[str, Any]) -> Record:
    only_one_of(params, "type", "types")
    wanted_types = set(params["types"]) if "types" in params else None
    pattern = re.compile(fnmatch.translate(params["type"])) if "type" in params else None
    created = params.get("created")
    delivered = params.get("delivery_success")
    events = [
        event
        for event in ctx.store.events.newest_first()
        if (wanted_types is None or event.type in wanted_types)
        and (pattern is None or pattern.match(event.type) is not None)
        and created_matches(event.created, created)
        and (delivered is None or (event.pending == 0) == delivered)
    ]
    return paginate(events, params, "/v1/events", "event", render, _ident)


def retrieve(ctx: Ctx, params: dict[str, Any]) -> Record:
    event = ctx.store.events.get(ctx.path["id"])
    if event is None:
        raise resource_missing("event", ctx.path["id"])
    return render(event)


ROUTES = (
    Endpoint("GET", "/v1/events", LIST, list_, "list<event>"),
    Endpoint("GET", "/v1/events/{id}", RETRIEVE, retrieve, "event"),
)
