"""The result backend: Celery's Redis backend (or its Sentinel variant), storing a command's
success without first reading what is stored.

Before storing any state, Celery's Redis backend reads the task's stored state and keeps a
``SUCCESS`` it finds (a duplicate delivery must not overwrite a success): a round trip to
Redis before every store, about 0.7 ms of each command's time in a worker's pool process
(docs/benchmarks.md, issue 34). A command's outcome is its command log's, and a duplicate
delivery of a command that succeeded replays the same recorded outcome, so a ``SUCCESS``
only ever overwrites itself: that store skips the read. Every other state (``RETRY``,
``FAILURE``) is stored as Celery does, after the read, so it never overwrites a success.
A store and its announcement go out in one pipeline, without a transaction around them.
"""

from __future__ import annotations

from typing import Any

from celery import states
from celery.backends.redis import RedisBackend, SentinelBackend
from celery.exceptions import BackendStoreError
from kombu.utils.encoding import bytes_to_str

from adapters.messaging.demoted_primary import follow_demotions


class _SuccessStoredUnread:
    """Stores ``SUCCESS`` without reading the stored state first (the module's docstring)."""

    def _store_result(
        self,
        task_id: Any,
        result: Any,
        state: str,
        traceback: Any = None,
        request: Any = None,
        **kwargs: Any,
    ) -> Any:
        backend: Any = self
        if state != states.SUCCESS:
            return super()._store_result(  # type: ignore[misc]
                task_id, result, state, traceback, request, **kwargs
            )
        meta = backend._get_result_meta(
            result=result, state=state, traceback=traceback, request=request
        )
        meta["task_id"] = bytes_to_str(task_id)
        try:
            backend._set_with_state(backend.get_key_for_task(task_id), backend.encode(meta), state)
        except BackendStoreError as error:
            raise BackendStoreError(str(error), state=state, task_id=task_id) from error  # type: ignore[call-arg]
        return result

    def _get_pool(self, **params: Any) -> Any:
        """Celery's connection pool, of connections that leave a primary demoted under them
        (:mod:`adapters.messaging.demoted_primary`): a result stored on an old primary turned
        into a replica is stored again on the new one, not failed with ``READONLY``."""
        return follow_demotions(super()._get_pool(**params))  # type: ignore[misc]

    def _set(self, key: Any, value: Any, expires: Any = None) -> None:
        """Store and announce ``value`` in one round trip, as Celery does, without wrapping
        the two in ``MULTI``/``EXEC``: a store Celery retries after a broken connection sends
        both again, and the stored value is the one readers trust (the announcement only
        wakes them)."""
        backend: Any = self
        if expires is None:
            expires = backend.expires
        with backend.client.pipeline(transaction=False) as pipe:
            if expires:
                pipe.set(key, value, ex=int(expires))
            else:
                pipe.set(key, value)
            pipe.publish(key, value)
            pipe.execute()


class CommandResults(_SuccessStoredUnread, RedisBackend):
    """The result backend on a Redis server."""


class SentinelCommandResults(_SuccessStoredUnread, SentinelBackend):
    """The result backend on the primary that Redis Sentinel names."""
