"""Idempotency keys, following Stripe's documented rules (https://docs.stripe.com/idempotency).

* Only ``POST`` requests use keys (Stripe ignores them on GET and DELETE). Keys are at most 255
  characters and scoped per API key.
* The first request that *begins executing* stores its status and body under the key; a later
  request with the same key, endpoint and parameters gets that stored response replayed, with
  ``Idempotent-Replayed: true``. Stripe's docs: "We save results only after the execution of an
  endpoint begins. If incoming parameters fail validation, or the request conflicts with
  another that's executing concurrently, no idempotent result is saved". So the emulator does
  **not** store: authentication failures, rate-limit 429s, parameter/expand validation errors,
  409s for a key in flight, and faults injected *before execution* (429, 500, 503, lock
  timeouts, dropped or hung connections). It **does** store errors raised while executing
  (a 404 for a missing customer, ``tax_id_invalid``...) and, like Stripe ("Retries with the
  same key return the saved response, including 500 errors"), a 500/503 injected *after
  execution*: the write happened and every retry with that key replays the 500.
* Same key with other parameters -> 400 ``idempotency_error``; with another endpoint -> 400
  ``idempotency_error`` too. A request arriving while another with the same key is still
  executing -> 409 ``idempotency_key_in_use``.
* Keys are forgotten 24 hours (of emulator time) after first use; the same key then runs the
  request again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

TTL_SECONDS: Final = 24 * 60 * 60
MAX_KEY_LENGTH: Final = 255

Scope = tuple[str, str]  # (API key, idempotency key)


@dataclass(slots=True)
class Stored:
    """A response saved under a key, with what the key was first used for."""

    endpoint: str
    params: dict[str, Any]
    status: int
    body: bytes
    headers: list[tuple[bytes, bytes]]
    request_id: str
    created: int  # emulator time


@dataclass(slots=True)
class InFlight:
    endpoint: str
    params: dict[str, Any]


class IdempotencyStore:
    def __init__(self) -> None:
        # Insertion order is creation order, and emulator time never goes backwards, so expired
        # keys are always at the front: pruning is cheap.
        self._stored: dict[Scope, Stored] = {}
        self._in_flight: dict[Scope, InFlight] = {}

    def prune(self, now: int) -> None:
        stored = self._stored
        while stored:
            scope = next(iter(stored))
            if now - stored[scope].created < TTL_SECONDS:
                break
            del stored[scope]

    def get(self, scope: Scope) -> Stored | None:
        return self._stored.get(scope)

    def in_flight(self, scope: Scope) -> InFlight | None:
        return self._in_flight.get(scope)

    def begin(self, scope: Scope, endpoint: str, params: dict[str, Any]) -> None:
        self._in_flight[scope] = InFlight(endpoint, params)

    def end(self, scope: Scope) -> None:
        self._in_flight.pop(scope, None)

    def save(self, scope: Scope, stored: Stored) -> None:
        self._stored[scope] = stored

    def clear(self) -> None:
        self._stored.clear()
        self._in_flight.clear()

    def __len__(self) -> int:
        return len(self._stored)

    # Persistence (the state file keeps keys across restarts, as Stripe keeps them for 24 h).

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {
                "api_key": api_key,
                "key": key,
                "endpoint": stored.endpoint,
                "params": stored.params,
                "status": stored.status,
                "body": stored.body.decode(),
                "headers": [[name.decode(), value.decode()] for name, value in stored.headers],
                "request_id": stored.request_id,
                "created": stored.created,
            }
            for (api_key, key), stored in self._stored.items()
        ]

    def load_json(self, entries: list[dict[str, Any]]) -> None:
        for entry in entries:
            self._stored[(entry["api_key"], entry["key"])] = Stored(
                endpoint=entry["endpoint"],
                params=entry["params"],
                status=entry["status"],
                body=entry["body"].encode(),
                headers=[(name.encode(), value.encode()) for name, value in entry["headers"]],
                request_id=entry["request_id"],
                created=entry["created"],
            )
