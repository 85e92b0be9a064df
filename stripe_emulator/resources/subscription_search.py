"""Searching subscriptions: ``GET /v1/subscriptions/search``.

Stripe's search query language (:mod:`stripe_emulator.search`) on ``status``
(``status:'active'``), ``customer`` (``customer:'cus_...'``), ``created`` (``created>1700000000``)
and ``metadata['key']:'value'``, with ``AND``/``OR`` and ``-`` negation; ``limit`` and ``page``
as for customers. Canceled subscriptions are searched too (no default status filter). Results
are visible at once, where Stripe's index lags writes by up to a minute.
"""

from __future__ import annotations

from typing import Any

from stripe_emulator import search
from stripe_emulator.objects import render_subscription
from stripe_emulator.params import PAGINATION, Str, schema
from stripe_emulator.resources.common import Ctx, Endpoint, newest_first
from stripe_emulator.state import Record

SEARCH = schema({"query": Str(required=True), "limit": PAGINATION["limit"], "page": Str()})


def search_(ctx: Ctx, params: dict[str, Any]) -> Record:
    store = ctx.store
    query = search.parse(params["query"], search.SUBSCRIPTION_FIELDS, "subscriptions")
    matches = search.matcher(query)
    records = [record for record in newest_first(store.subscriptions) if matches(record)]
    return search.result(
        records,
        params,
        "/v1/subscriptions/search",
        lambda record: render_subscription(store, record),
    )


ROUTES = (Endpoint("GET", "/v1/subscriptions/search", SEARCH, search_, "search<subscription>"),)
