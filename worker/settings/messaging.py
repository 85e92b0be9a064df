"""Redis: the broker, the result backend, the event stream, and how to find the primary
(``adapters/messaging``, ``adapters/outbound``'s stream).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, SecretStr, field_validator

from worker.settings.section import Section

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


class MessagingSettings(Section):
    """Redis: the broker, the result backend, the event stream, and how to find the primary
    (``adapters/messaging``, ``adapters/outbound``'s stream).
    """

    title: ClassVar[str] = "Messaging (Redis)"

    redis_url: str | None = Field(
        default=None,
        description="Broker and result backend. Unset: `up` starts an embedded Redis; other "
        "commands use the one recorded in <data_dir>/stack.json.",
    )
    redis_sentinels: str = Field(
        default="",
        description="Redis Sentinel: the sentinels to ask for the current primary, "
        "`host:port,host:port` (port 26379 if left out). Set, every Redis client of every "
        "process (the broker, the result backend, the API's result listener, the Stripe "
        "budget, the event stream, dead letters, the clock) follows the primary they name "
        "through failovers, and BILLING_REDIS_URL is not used; unset: BILLING_REDIS_URL.",
    )
    redis_master_name: str = Field(
        default="mymaster",
        description="Redis Sentinel: the name the sentinels monitor the primary under "
        "(`sentinel monitor <name> …`).",
    )
    redis_username: str | None = Field(
        default=None,
        description="Redis Sentinel: the ACL user of the primary and its replicas (unset: "
        "the default user).",
    )
    redis_password: SecretStr | None = Field(
        default=None,
        description="Redis Sentinel: the password of the primary and its replicas (their "
        "`requirepass`; unset: none). Without sentinels the password is BILLING_REDIS_URL's.",
    )
    redis_sentinel_username: str | None = Field(
        default=None, description="Redis Sentinel: the ACL user of the sentinels (unset: none)."
    )
    redis_sentinel_password: SecretStr | None = Field(
        default=None,
        description="Redis Sentinel: the password of the sentinels themselves (their "
        "`requirepass`, often not the primary's; unset: none).",
    )
    redis_db: int = Field(
        default=0, ge=0, description="Redis Sentinel: the database number on the primary."
    )
    redis_socket_timeout_seconds: float = Field(
        default=5.0,
        gt=0,
        description="Redis Sentinel: how long a command (and a connection attempt) to the "
        "primary may wait before the client gives up on that connection and asks the sentinels "
        "again; kombu requires one for failover (a dead primary's connection would wait "
        "forever). Longer than the broker's 1 s blocking poll.",
    )
    broker_visibility_timeout_seconds: float = Field(
        default=600.0,
        gt=0,
        description="Unacknowledged messages return to the queue after "
        "this long (a killed worker's commands).",
    )
    events_stream: str = Field(
        default="billing:events",
        description="The Redis stream events are added to (on the broker's Redis).",
    )
    events_stream_maxlen: int = Field(
        default=100_000,
        ge=1,
        description="About how many events the stream keeps (older ones are trimmed).",
    )

    @field_validator("redis_sentinels")
    @classmethod
    def _redis_sentinels(cls, value: str) -> str:
        for entry in filter(None, (part.strip() for part in value.split(","))):
            _host, colon, port = entry.rpartition(":")
            if colon and not (port.isdigit() and 0 < int(port) < 65536):
                raise ValueError(f"{entry!r} is not host:port (BILLING_REDIS_SENTINELS)")
        return value

    def resolved_redis_url(self) -> str:
        """``BILLING_REDIS_URL``, or the default local Redis."""
        return self.redis_url or DEFAULT_REDIS_URL

    def sentinel_addresses(self) -> list[tuple[str, int]]:
        """The sentinels of ``BILLING_REDIS_SENTINELS`` as (host, port); ``[]``: none."""
        addresses = []
        for entry in self.redis_sentinels.split(","):
            entry = entry.strip()
            if not entry:
                continue
            host, _, port = entry.rpartition(":") if ":" in entry else (entry, "", "26379")
            addresses.append((host.strip("[]"), int(port)))
        return addresses
