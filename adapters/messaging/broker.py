"""The Redis broker, guarded: any bytes on a queue become a task message or a dead letter.

Our queues are shared with other services, so a message may be anything. Celery does not
protect a worker from that: kombu's Redis transport decodes the envelope (JSON, then base64)
before Celery's consumer sees it, and a failure there, or a Celery message body that is not
``[args, kwargs, embed]``, escapes into the worker's event loop and stops the worker for good
(the message is restored and stops every restart too). So the guard sits where a message
leaves Redis, in the transport's channel (:class:`GuardedChannel`): a message that

* is over :data:`MAX_MESSAGE_BYTES`,
* is not a JSON object envelope with the fields kombu reads,
* has a body that does not decode as its ``body_encoding`` says,
* has a content type other than JSON (pickle and the like are never deserialized),
* is not a Celery protocol 2 message (headers with ``task`` and ``id``; a body
  ``[args, kwargs, embed]``),

is written to the dead-letter store (:mod:`adapters.messaging.dead_letters`) with its raw bytes,
queue and reason, and dropped from the queue (it was popped, so this is its acknowledgement). A
message that passes has its ``argsrepr``/``kwargsrepr`` headers, which Celery's events and
Flower show, rewritten from its arguments with personal data masked
(:mod:`adapters.messaging.masking`), and its log fields remembered for Celery's lines about it
(:mod:`adapters.observability.logs`). Messages Celery itself refuses later (an unknown task
name) are dead-lettered by :class:`GuardedConsumer`. Neither ever stops the worker nor the
next message.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, cast

import redis
from celery.worker.consumer import Consumer
from kombu.transport import redis as kombu_redis
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads

from adapters.messaging.dead_letters import DeadLetters
from adapters.messaging.demoted_primary import leaving_demoted_primary
from adapters.messaging.transport_options import (
    MASK_PERSONAL_DATA,
    SHIFTABLE_CLOCK,
    transport_option,
)
from domain.redaction import redact

logger = logging.getLogger(__name__)

# kombu's Redis transport is untyped where we extend it (private methods of 5.7).
_RedisChannel: Any = kombu_redis.Channel
_RedisTransport: Any = kombu_redis.Transport
_SentinelChannel: Any = kombu_redis.SentinelChannel
_Empty: type[Exception] = kombu_redis.Empty  # type: ignore[attr-defined]

MAX_MESSAGE_BYTES = 1024 * 1024
"""The largest message a worker takes (the whole envelope, as it sits in Redis). A command is
a few kilobytes; an avatar is never sent on the queue."""

ACCEPTED_CONTENT_TYPES = frozenset({"application/json"})


class Rejected(Exception):
    """Why a raw message is not a task message we can run."""


def check_envelope(raw: bytes, *, task_message: bool = True) -> dict[str, Any]:
    """The kombu envelope in ``raw``, or :class:`Rejected` saying what is wrong with it.
    Messages of other queues than the task queues (replies to control commands) are only
    checked for what kombu needs to read them."""
    if len(raw) > MAX_MESSAGE_BYTES:
        raise Rejected(f"message of {len(raw)} bytes is over the {MAX_MESSAGE_BYTES}-byte cap")
    try:
        envelope = loads(bytes_to_str(raw))
    except (ValueError, UnicodeDecodeError) as error:
        raise Rejected(f"envelope is not JSON: {error}") from None
    if not isinstance(envelope, dict):
        raise Rejected(f"envelope is a JSON {type(envelope).__name__}, not an object")
    properties = envelope.get("properties")
    if not isinstance(properties, dict) or "delivery_tag" not in properties:
        raise Rejected("envelope has no properties with a delivery_tag")
    if not task_message:
        return envelope
    headers = envelope.get("headers")
    if not isinstance(headers, dict):
        raise Rejected("envelope has no headers object")
    task, task_id = headers.get("task"), headers.get("id")
    if not isinstance(task, str) or not isinstance(task_id, str):
        raise Rejected("headers name no task and id (not a Celery protocol 2 message)")
    content_type = envelope.get("content-type")
    if content_type not in ACCEPTED_CONTENT_TYPES:
        raise Rejected(f"content type {content_type!r} is refused (JSON only)")
    body = envelope.get("body")
    if not isinstance(body, str):
        raise Rejected("envelope has no body string")
    encoding = properties.get("body_encoding")
    if encoding == "base64":
        try:
            body = base64.b64decode(body, validate=True).decode("utf-8")
        except ValueError:  # binascii.Error, non-ASCII text, UnicodeDecodeError
            raise Rejected("body is not base64-encoded UTF-8 as its body_encoding says") from None
    elif encoding not in (None, "utf-8"):
        raise Rejected(f"body encoding {encoding!r} is not supported")
    try:
        decoded = json.loads(body)
    except ValueError as error:
        raise Rejected(f"body is not JSON: {error}") from None
    if not (
        isinstance(decoded, list)
        and len(decoded) == 3
        and isinstance(decoded[0], list)
        and isinstance(decoded[1], dict)
        and isinstance(decoded[2], dict)
    ):
        raise Rejected("body is not [args, kwargs, embed]")
    return envelope


def _show_masked(envelope: dict[str, Any], *, mask: bool) -> None:
    """What Celery shows of a checked task message: its arguments masked (unless
    ``BILLING_MASK_PERSONAL_DATA`` is off), and its command's log fields."""
    from adapters.messaging.masking import mask_argument_reprs, message_log_fields
    from adapters.observability.logs import remember_message

    headers = envelope["headers"]
    try:
        body = envelope["body"]
        if envelope["properties"].get("body_encoding") == "base64":
            body = base64.b64decode(body).decode("utf-8")
        args, kwargs, _embed = json.loads(body)
        if mask:
            mask_argument_reprs(headers, args, kwargs)
        remember_message(headers["id"], message_log_fields(headers, kwargs))
    except Exception:  # a checked message: not expected, and never a reason to refuse it
        logger.exception("could not mask the arguments of message %s", headers.get("id"))
        if mask:
            headers["argsrepr"] = headers["kwargsrepr"] = "(not shown)"


class GuardedChannel(_RedisChannel):  # type: ignore[misc]
    """kombu's Redis channel, with every popped message checked before it is delivered, and
    one client for what it sends outside the poll."""

    _sending_client: redis.Redis | None = None

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        """kombu's connection parameters, with connections that leave a primary demoted under
        them (:mod:`adapters.messaging.demoted_primary`). kombu counts ``READONLY`` and
        ``UNBLOCKED`` (redis-py's response errors) among its channel errors, so a worker whose
        blocking read met a managed Redis's failover (the old primary turned into a replica in
        place) stopped for good; as connection errors, Celery reconnects it, to the new
        primary behind the same name, and what it had delivered and not acknowledged waits in
        Redis's unacknowledged set as after any lost connection."""
        params = cast(dict[str, Any], super()._connparams(asynchronous=asynchronous))
        params["connection_class"] = leaving_demoted_primary(params["connection_class"])
        return params

    @property
    def pool(self) -> Any:
        """kombu's pool, or a connection error once the channel's connection was collected.
        After a lost connection Celery collects it (the transport forgets its client), then
        closes it; closing the channel puts its delivered, unacknowledged messages back, and
        kombu (5.7) would build a pool for that from the forgotten client: an
        ``AttributeError`` that stops the worker for good (seen on a Sentinel failover). As a
        connection error it is ignored like any other on that path, and the messages are not
        lost: they wait in Redis's unacknowledged set until the visibility timeout hands them
        back."""
        if self._pool is None and getattr(self.connection, "client", None) is None:
            raise redis.ConnectionError("the channel's connection is closed")
        return super().pool

    @contextmanager
    def conn_or_acquire(self, client: redis.Redis | None = None) -> Iterator[redis.Redis]:
        """kombu (5.7) builds a new ``redis.Redis`` for each command sent outside the poll: a
        publish, a task event. Building one (its response callbacks…) costs more than the
        command's round trip; this channel keeps one over its connection pool instead (a
        client is thread-safe, and takes a connection from the pool for each command)."""
        if client is not None:
            yield client
            return
        kept = self._sending_client
        if kept is None or kept.connection_pool is not self.pool:
            kept = self._sending_client = self._create_client()
        yield kept

    def _guarded(self, raw: bytes, queue: str) -> dict[str, Any] | None:
        from adapters.messaging.config import CONSUMED_QUEUES

        task_message = queue in CONSUMED_QUEUES
        try:
            envelope = check_envelope(raw, task_message=task_message)
        except Exception as why:  # Rejected, or a case the checks did not foresee
            try:
                with self.conn_or_acquire() as client:  # not the BRPOP connection
                    shiftable = self._transport_option(SHIFTABLE_CLOCK)
                    DeadLetters(client, shiftable_clock=shiftable).add(
                        raw, queue=queue, reason=str(why)
                    )
            except Exception:
                logger.exception("could not record a dead letter from %s", queue)
            logger.error("dead letter from queue %s: %s", queue, why)
            return None
        if task_message:
            _show_masked(envelope, mask=self._transport_option(MASK_PERSONAL_DATA))
        return envelope

    def _transport_option(self, name: str) -> bool:
        client = getattr(self.connection, "client", None)
        return transport_option(getattr(client, "transport_options", None) or {}, name)

    def _brpop_read(self, **options: Any) -> bool:
        # kombu's own _brpop_read (5.7), with the envelope checked before delivery.
        try:
            try:
                dest__item = self.client.parse_response(self.client.connection, "BRPOP", **options)
            except self.connection_errors:
                self.client.connection.disconnect()
                raise
            if not dest__item:
                raise _Empty()
            dest, item = dest__item
            dest = bytes_to_str(dest).rsplit(self.sep, 1)[0]
            self._queue_cycle.rotate(dest)
            envelope = self._guarded(item, dest)
            if envelope is not None:
                self.connection._deliver(envelope, dest)
            return True
        finally:
            self._in_poll = None
            self._flush_brpop_reauth()

    def _get(self, queue: str, timeout: float | None = None) -> dict[str, Any]:
        with self.conn_or_acquire() as client:
            for priority in self.priority_steps:
                while item := client.rpop(self._q_for_pri(queue, priority)):
                    envelope = self._guarded(cast(bytes, item), queue)
                    if envelope is not None:
                        self._maybe_update_queues_expire(client, queue)
                        return envelope
            self._maybe_update_queues_expire(client, queue)
            raise _Empty()


class GuardedRedisTransport(_RedisTransport):  # type: ignore[misc]
    """``broker_transport`` of our Celery app: the Redis transport with a guarded channel."""

    Channel = GuardedChannel


class GuardedSentinelChannel(GuardedChannel, _SentinelChannel):  # type: ignore[misc]
    """The guarded channel over kombu's Sentinel channel: the same checks on every popped
    message and the same kept client, on connections to whichever server the sentinels name
    as the primary (kombu's ``SentinelChannel`` makes the pools; ours reads from them)."""


class GuardedSentinelTransport(GuardedRedisTransport):
    """``broker_transport`` of our Celery app with ``BILLING_REDIS_SENTINELS``: kombu's
    ``sentinel://`` transport with the guarded channel (``adapters/messaging/redis_clients.py``
    selects it)."""

    Channel = GuardedSentinelChannel
    default_port = kombu_redis.SentinelTransport.default_port


def _logged(body: Any, *, mask: bool) -> Any:
    """A refused message's body as Celery's own handling logs it: masked (the dead letter
    keeps it whole)."""
    return redact(body) if mask else body


TASK_EVENTS_FLUSH_SECONDS = 0.1
"""How long a worker's task events wait in its buffer before they are published together."""


class GuardedConsumer(Consumer):
    """The worker's consumer: messages Celery refuses after the transport's guard (an unknown
    task name, a message it cannot decode or accept) are dead-lettered before Celery's own
    handling (which logs them, rejects them and, for an unknown task, records a failure).

    Its task events (what Flower shows) are published every :data:`TASK_EVENTS_FLUSH_SECONDS`
    at most, as one message, or at Celery's buffer limit (24 events). Celery publishes its
    buffer on the event loop's next turn: about two publishes a task under load, each a round
    trip to Redis that holds up the loop which hands the next message to a pool process (29 %
    of the main process's time at 300 commands a second, docs/benchmarks.md, issue 34)."""

    _events_flush_at = 0.0

    def on_send_event_buffered(self) -> Any:
        celery_consumer: Any = self  # the stubs lack the loop's attributes
        if not celery_consumer.hub:
            return None
        now = time.monotonic()
        # A flush is due already; a timer lost with the connection is replaced once its
        # moment has passed.
        if now < self._events_flush_at:
            return None
        self._events_flush_at = now + TASK_EVENTS_FLUSH_SECONDS
        return celery_consumer.hub.call_later(
            TASK_EVENTS_FLUSH_SECONDS, celery_consumer._flush_events_promise
        )

    def shutdown(self) -> None:
        # The buffer's last events reach Flower before the dispatcher closes.
        celery_consumer: Any = self
        with suppress(Exception):
            celery_consumer._flush_events()
        super().shutdown()

    def _transport_option(self, name: str) -> bool:
        options = self.app.conf.broker_transport_options or {}
        return transport_option(options, name)

    def _record(self, message: Any, reason: str) -> None:
        try:
            raw = json.dumps(message.serializable()).encode()
        except Exception:
            raw = repr(getattr(message, "body", b"")).encode()
        queue = (getattr(message, "delivery_info", None) or {}).get("routing_key") or "?"
        try:
            with self.app.connection_for_write() as connection:
                client = cast(Any, connection.default_channel).client
                shiftable = self._transport_option(SHIFTABLE_CLOCK)
                DeadLetters(client, shiftable_clock=shiftable).add(
                    raw, queue=str(queue), reason=reason
                )
        except Exception:
            logger.exception("could not record a dead letter from %s", queue)

    def on_unknown_task(self, body: Any, message: Any, exc: Exception) -> None:
        name = (getattr(message, "headers", None) or {}).get("task")
        self._record(message, f"unknown task {name!r}")
        super().on_unknown_task(
            _logged(body, mask=self._transport_option(MASK_PERSONAL_DATA)), message, exc
        )

    def on_unknown_message(self, body: Any, message: Any) -> None:
        self._record(message, "not a task message")
        super().on_unknown_message(
            _logged(body, mask=self._transport_option(MASK_PERSONAL_DATA)), message
        )

    def on_invalid_task(self, body: Any, message: Any, exc: Exception) -> None:
        self._record(message, f"invalid task message: {exc}")
        super().on_invalid_task(
            _logged(body, mask=self._transport_option(MASK_PERSONAL_DATA)), message, exc
        )

    def on_decode_error(self, message: Any, exc: Exception) -> None:
        self._record(message, f"message cannot be decoded: {exc}")
        super().on_decode_error(message, exc)
