"""Settings, read from the environment with the ``BILLING_`` prefix.

Every default is the embedded one, so nothing needs configuring to start: the data directory
holds the SQLite database and the embedded Redis; with no Stripe key the Stripe emulator
started by ``billing-worker up`` is used.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from domain.billing.currencies import currency_code
from domain.subscriptions.proration import ProrationBehavior

STACK_FILE = "stack.json"
DATA_DIR_NAME = ".billing-worker"


def default_data_dir(start: Path | None = None) -> Path:
    """``./.billing-worker``, unless a parent directory holds the nearest local stack's (one
    with ``stack.json`` or ``billing.db``): as git finds ``.git``, admin commands find the
    stack ``up`` started from anywhere below where it runs."""
    try:
        here = (start or Path.cwd()).resolve()
    except OSError:  # the working directory is gone
        return Path(DATA_DIR_NAME)
    for directory in (here, *here.parents):
        candidate = directory / DATA_DIR_NAME
        if (candidate / STACK_FILE).is_file() or (candidate / "billing.db").is_file():
            return Path(DATA_DIR_NAME) if directory == here else candidate
    return Path(DATA_DIR_NAME)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BILLING_", extra="ignore")

    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Where the embedded stack keeps SQLite, Redis data, logs and stack.json "
        "(default: ./.billing-worker, or the nearest such directory of a local stack in a "
        "parent directory).",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL; unset: sqlite:///<data_dir>/billing.db. PostgreSQL: "
        "postgresql+psycopg://user:pass@host/db.",
    )
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
    stripe_api_key: SecretStr | None = Field(
        default=None, description="Stripe secret key; unset: the local Stripe emulator."
    )
    stripe_api_base: str | None = Field(
        default=None,
        description="Stripe API base URL; unset: api.stripe.com with a key, "
        "else the emulator recorded in stack.json.",
    )
    stripe_timeout_seconds: float = Field(
        default=30.0, gt=0, description="Timeout of one Stripe request (then retried)."
    )
    stripe_budget_enabled: bool = Field(
        default=True,
        description="Meter every Stripe call through the account's shared rate budget in Redis "
        "(off: calls go out as fast as workers make them, as before the budget existed).",
    )
    stripe_rate_per_second: float | None = Field(
        default=None,
        gt=0,
        description="Stripe calls per second for reads and for writes alike; unset: Stripe's "
        "published limit for the key's mode (25 in test mode, 100 in live mode).",
    )
    stripe_burst: int | None = Field(
        default=None,
        ge=0,
        description="Calls interactive commands may make ahead of the pace (bulk calls never "
        "burst); unset: a fifth of a second's rate.",
    )
    stripe_max_wait_seconds: float = Field(
        default=1.0,
        ge=0,
        description="The longest a task blocks its process for a budget token; a longer wait "
        "re-queues the task until its token is due (not counted as a retry).",
    )
    default_currency: str = Field(
        default="usd",
        description="Currency of a billing account created without one (ISO 4217, one Stripe "
        "accepts; any case, used in lower case).",
    )
    provider_idempotency_window_seconds: float = Field(
        default=23 * 3600.0,
        gt=0,
        description="A registration retried after this long searches Stripe for the customer "
        "before creating it (Stripe forgets idempotency keys after 24 hours).",
    )
    proration_behavior: ProrationBehavior = Field(
        default="create_prorations",
        description="Stripe's proration_behavior for immediate plan changes (a change at a "
        "period's end is never prorated). With create_prorations an upgrade is still invoiced "
        "at once and made only if paid (always_invoice); a downgrade's credit waits for the "
        "next invoice.",
    )
    period_end_lead_seconds: float = Field(
        default=3600.0,
        ge=0,
        description="How long before its period's end a plan change at the period's end is "
        "made at Stripe (without proration), so that Stripe's renewal invoices the new period "
        "at the new price; longer than a period-end burst takes to drain at the Stripe budget "
        "(10,000 changes at 25 writes/s: 400 s).",
    )
    staged_change_guard_seconds: float = Field(
        default=5.0,
        ge=0,
        description="A plan change already made at Stripe ahead of its period's end (within "
        "the lead) is taken back for a cancel, a replacement or an immediate change until "
        "this long before the boundary; later such requests get 400 CHANGE_ALREADY_STAGED. "
        "A withdrawal Stripe receives after it renewed is corrected (prorated back).",
    )
    reconcile_interval_seconds: float = Field(
        default=10.0,
        gt=0,
        description="How often beat's reconciliation sweep re-reads, from Stripe, the "
        "subscriptions and customers read longest ago (the backstop for webhooks).",
    )
    reconcile_reads_per_second: float = Field(
        default=5.0,
        gt=0,
        description="Stripe reads per second the reconciliation sweep may spend (at bulk "
        "priority, within the shared budget): 10,000 subscriptions are each re-read within "
        "10,000 / this seconds (about 35 minutes at 5/s).",
    )
    stripe_webhook_secrets: str = Field(
        default="",
        description="Signing secrets (whsec_…, comma-separated) of Stripe webhook endpoints "
        "whose events this deployment accepts, besides those `billing-worker stripe webhooks "
        "register` stored; several during a rotation.",
    )
    stripe_webhook_max_failures_per_source: int = Field(
        default=20,
        ge=1,
        description="Stripe webhook deliveries from one source address refused for their "
        "signature (or size) within `BILLING_AUTH_FAILURE_WINDOW_SECONDS` before that source's "
        "deliveries are answered 429 before their body is read. Stripe signs every delivery "
        "afresh, so only a misconfigured secret or someone else fails here.",
    )
    scheduled_changes_interval_seconds: float = Field(
        default=1.0,
        gt=0,
        description="How often beat looks for plan changes that fell due (each sweep claims "
        "what the Stripe budget can apply before the next ones).",
    )
    scheduled_changes_batch_size: int = Field(
        default=500, ge=1, le=5000, description="The most due plan changes one sweep claims."
    )
    scheduled_change_lease_seconds: float = Field(
        default=900.0,
        gt=0,
        description="How long a worker has to apply a claimed plan change before a sweep "
        "hands it to another (a killed worker); longer than a command's retry budget.",
    )
    command_retention_days: int = Field(
        default=30,
        ge=1,
        description="A succeeded command is deleted from the command log this many days after "
        "it finished, with its idempotency key (a key can then be used again: a new command).",
    )
    failed_command_retention_days: int = Field(
        default=90,
        ge=1,
        description="A failed command is kept this many days after it failed, for operators "
        "to see and replay (a replay makes it queued again: its age counts from its new run).",
    )
    rejected_command_retention_days: int = Field(
        default=7,
        ge=1,
        description="A rejected command (the caller's mistake: never replayed, paging nobody) "
        "is kept this many days after it was rejected.",
    )
    command_retention_batch: int = Field(
        default=1000,
        ge=1,
        le=10_000,
        description="Commands one transaction of the command log's pruning deletes.",
    )
    command_retention_max_batches: int = Field(
        default=100,
        ge=1,
        description="Batches one pruning sweep deletes at most; the rest waits for the next.",
    )
    command_retention_interval_seconds: float = Field(
        default=3600.0, gt=0, description="How often beat prunes the command log."
    )
    pending_account_redrive_after_seconds: float = Field(
        default=900.0,
        gt=0,
        description="A billing account still `pending` (not registered with Stripe) this long "
        "after it was opened has its registration sent again by beat, and again after each "
        "further period of this length (one command per account and period); longer than a "
        "registration's retries take.",
    )
    pending_account_redrive_interval_seconds: float = Field(
        default=300.0,
        gt=0,
        description="How often beat looks for billing accounts stuck `pending` (a sweep "
        "within the same re-drive period sends the same command again, which runs once).",
    )
    api_host: str = Field(
        default="127.0.0.1",
        description="Address the HTTP API listens on (0.0.0.0 in a container).",
    )
    api_port: int = Field(default=8080, description="Port of the HTTP API.")
    api_processes: int = Field(
        default=1,
        ge=1,
        le=64,
        description="API processes serving the one port (uvicorn's workers, restarted if one "
        "dies). Their metrics add up in one `/metrics` answer (multiprocess mode) and they "
        "share the failed-authentication throttle through Redis.",
    )
    flower_port: int = Field(default=5555, description="Port of Flower.")
    metrics_host: str = Field(
        default="127.0.0.1",
        description="Address the worker's and beat's metrics exporters listen on (0.0.0.0 in "
        "a container, for Prometheus to reach them).",
    )
    worker_metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="Port of a worker node's Prometheus exporter, served by its main process "
        "for all its pool processes (multiprocess mode, PROMETHEUS_MULTIPROC_DIR); 0: none.",
    )
    beat_metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="Port of beat's Prometheus exporter, whose gauges (queue depth, scheduled "
        "changes, oldest due change, failed commands, the Stripe budget) are read from the "
        "database and Redis at each scrape; 0: none.",
    )
    flower_user: str = Field(default="admin", description="Flower basic-auth user.")
    flower_password: SecretStr | None = Field(
        default=None,
        description="Flower basic-auth password; if unset, `up` makes one and keeps it in the "
        "data directory (`flower-password`) for every later `up`.",
    )
    console_csrf_secret: SecretStr | None = Field(
        default=None,
        description="The secret the console's forms are signed with against cross-site request "
        "forgery (at least 16 characters); if unset, one is made and kept in Redis, shared by "
        "every API process on that Redis.",
        min_length=16,
    )
    http_wait_timeout_seconds: float = Field(
        default=10.0,
        ge=0,
        description="How long the API waits for a command's outcome before answering 202.",
    )
    api_read_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="How long a client has to send a whole request, head and body, from its "
        "first byte (or from connecting); slower clients get a 408 and are disconnected.",
    )
    beat_interval_seconds: float = Field(default=5.0, gt=0, description="Period of beat sweeps.")
    retry_max_attempts: int = Field(
        default=8, ge=1, description="Attempts per command for transient failures."
    )
    retry_base_delay_seconds: float = Field(
        default=1.0,
        gt=0,
        description="Backoff of a command's transient failures: the n-th retry waits a delay "
        "drawn uniformly in [0, min(max, base·2^n)] (full jitter), at least the provider's "
        "Retry-After.",
    )
    retry_max_delay_seconds: float = Field(
        default=60.0, gt=0, description="The longest backoff between two attempts of a command."
    )
    stalled_command_seconds: float = Field(
        default=300.0,
        gt=0,
        description="A queued command older than this, or a retrying one this long past its "
        "retry's time, is published again (its message was lost).",
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
    events_relay_interval_seconds: float = Field(
        default=5.0,
        gt=0,
        description="How often beat publishes events a worker left behind (each worker "
        "process publishes its commands' events as they finish).",
    )
    events_relay_coalesce_seconds: float = Field(
        default=0.05,
        ge=0,
        le=5,
        description="The shortest time between two relays of one worker node (its processes "
        "share it). An idle node relays a command's events as soon as it finishes; under load, "
        "the events of every command finished within this time go out together (one lock, one "
        "read, one stream append), which is what lets a worker keep up. 0: a relay after "
        "every command.",
    )
    webhook_retry_base_seconds: float = Field(
        default=5.0, gt=0, description="Backoff of a failed webhook delivery's first retry."
    )
    webhook_retry_max_seconds: float = Field(
        default=3600.0, gt=0, description="The longest backoff between two attempts."
    )
    webhook_retry_budget_seconds: float = Field(
        default=86_400.0,
        gt=0,
        description="How long a delivery is retried after its first attempt; then it fails "
        "and its endpoint is disabled.",
    )
    webhook_timeout_seconds: float = Field(
        default=10.0, gt=0, description="How long a receiver has to answer."
    )
    webhook_lease_seconds: float = Field(
        default=900.0,
        gt=0,
        description="How long a claimed delivery is left to its message (queued, then "
        "attempted) before the sweep takes it again; above the broker's visibility timeout, "
        "which hands a dead worker's message back first.",
    )
    webhook_sweep_interval_seconds: float = Field(
        default=2.0, gt=0, description="How often beat sends deliveries that are due."
    )
    webhook_allow_private_networks: bool | None = Field(
        default=None,
        description="Let webhook endpoints name localhost or private, link-local and other "
        "addresses that are not public. Unset: only beside a running `up` (a machine's own "
        "stack); set it true for receivers inside your network.",
    )
    webhook_secret_grace_seconds: float = Field(
        default=86_400.0,
        ge=0,
        description="After a secret rotation, how long the old secret still signs too.",
    )
    database_lock_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="How long a statement waits for a lock before failing; such failures "
        "are retried like any transient error.",
    )
    auth_cache_seconds: float = Field(
        default=60.0,
        ge=0,
        description="How long a verified client secret is trusted. A client that uses it past "
        "half this time has it verified again in the background, so an active client never "
        "waits for a hash, and a disabled client or a rotated secret is seen within this time.",
    )
    auth_max_failures_per_client: int = Field(
        default=10,
        ge=1,
        description="Failed authentications of one client id within the window before its "
        "requests are refused (429) without a hash.",
    )
    client_commands_per_second: float = Field(
        default=1.0,
        ge=0,
        description="New commands one API client may send per second for one organization, "
        "sustained (previews, changes, creations alike; 0: no limit per organization). Beyond "
        "it and its burst a request is refused (429, Retry-After) before anything is recorded, "
        "so that a flood aimed at one organization cannot take the workers and Stripe's budget "
        "from every organization's period end: interactive commands go first on both, so keep "
        "a client's rate times its commands' Stripe calls a small part of "
        "BILLING_STRIPE_RATE_PER_SECOND. A command of no organization (enabling a user) is "
        "counted by BILLING_CLIENT_TOTAL_COMMANDS_PER_SECOND only.",
    )
    client_command_burst: int = Field(
        default=20,
        ge=0,
        description="New commands one API client may send at once for one organization, on "
        "top of its rate.",
    )
    client_total_commands_per_second: float = Field(
        default=5.0,
        ge=0,
        description="New commands one API client may send per second in all, sustained, "
        "whatever the organizations (and commands of no organization, such as enabling a "
        "user); 0: no ceiling. The share per organization cannot be multiplied past it by "
        "naming many organizations. 5 a second is 2 % of a worker core (4 ms a command) and "
        "a fortieth of the 200 commands a second the capacity page sizes a deployment for.",
    )
    client_total_command_burst: int = Field(
        default=100,
        ge=0,
        description="New commands one API client may send at once in all, on top of its "
        "ceiling's rate: a batch of 100 user enables is accepted at once (about 0.4 s of one "
        "worker process).",
    )
    auth_max_failures_per_source: int = Field(
        default=30,
        ge=1,
        description="Failed authentications from one source address within the window before "
        "its requests are refused (429) without a hash.",
    )
    auth_failure_window_seconds: float = Field(
        default=60.0, gt=0, description="The sliding window of failed authentications."
    )
    auth_throttled_hold_seconds: float = Field(
        default=1.0,
        ge=0,
        le=10,
        description="How long a refusal for too many failed authentications is held before "
        "it is sent: a flooding client then waits instead of sending again at once.",
    )
    auth_max_held_refusals: int = Field(
        default=1024,
        ge=0,
        description="Refusals an API process holds at once; beyond it they are sent at once.",
    )
    auth_max_concurrent_hashes: int = Field(
        # One core is left to the event loop: each argon2id verification takes a core and
        # 64 MiB of memory traffic for about 0.1 s.
        default_factory=lambda: max(1, (os.cpu_count() or 2) - 1),
        ge=1,
        description="Slow (argon2id) verifications an API process runs at once "
        "(default: the machine's cores less one, at least one).",
    )
    shiftable_clock: bool = Field(
        default=False,
        description="Local stack and tests only: let `clock advance` shift "
        "the application clock. Production keeps real time.",
    )
    log_level: str = Field(
        default="INFO",
        description="Level of the log lines of the API, workers and beat (DEBUG, INFO, "
        "WARNING, ERROR).",
    )
    log_format: Literal["json", "console"] = Field(
        default="json",
        description="How the API, workers and beat write log lines: `json`, one JSON object "
        "a line (the default of the separate processes), or `console`, text for a terminal "
        "(the default under `up`).",
    )
    mask_personal_data: bool = Field(
        default=True,
        description="Mask personal data (emails, phones, addresses, tax ids, names) wherever "
        "commands are shown: Flower, Celery's events, the result backend and log lines. "
        "Off: shown whole, for local debugging only.",
    )

    @field_validator("redis_sentinels")
    @classmethod
    def _redis_sentinels(cls, value: str) -> str:
        for entry in filter(None, (part.strip() for part in value.split(","))):
            _host, colon, port = entry.rpartition(":")
            if colon and not (port.isdigit() and 0 < int(port) < 65536):
                raise ValueError(f"{entry!r} is not host:port (BILLING_REDIS_SENTINELS)")
        return value

    @field_validator("default_currency")
    @classmethod
    def _default_currency(cls, value: str) -> str:
        return currency_code(value)

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'billing.db').resolve()}"

    def stack(self) -> dict[str, Any]:
        """What ``up`` recorded of the processes it started, or ``{}``. Its ``stopped`` is the
        data directory's lock's word where there is one: a stack runs while ``up`` or a
        process it started holds the lock (:mod:`worker.local.stack_lock`)."""
        from worker.local.stack_lock import is_held

        path = self.data_dir / STACK_FILE
        try:
            loaded = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(loaded, dict):
            return {}
        held = is_held(self.data_dir)
        return loaded if held is None else {**loaded, "stopped": not held}

    def resolved_redis_url(self) -> str:
        if self.redis_url:
            return self.redis_url
        recorded = self.stack().get("redis_url")
        return str(recorded) if recorded else "redis://127.0.0.1:6379/0"

    def with_stack_redis(self) -> Settings:
        """These settings, or, when they name no Redis (neither ``BILLING_REDIS_URL`` nor
        ``BILLING_REDIS_SENTINELS``) and ``up --ha`` recorded its sentinels in
        ``stack.json``, these settings with those sentinels, master name and passwords: an
        admin command next to ``up --ha`` follows the primary as the stack's processes do."""
        if self.redis_url or self.redis_sentinels:
            return self
        recorded = self.stack().get("redis_ha")
        if not isinstance(recorded, dict) or not recorded.get("sentinel_addresses"):
            return self
        return self.model_copy(
            update={
                "redis_sentinels": str(recorded["sentinel_addresses"]),
                "redis_master_name": str(recorded["master_name"]),
                "redis_password": SecretStr(str(recorded["password"])),
                "redis_sentinel_password": SecretStr(str(recorded["sentinel_password"])),
                "redis_socket_timeout_seconds": float(
                    recorded.get("socket_timeout_seconds", self.redis_socket_timeout_seconds)
                ),
            }
        )

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

    def resolved_shiftable_clock(self) -> bool:
        """Whether this process keeps the shiftable clock: set, or (an admin command next to
        ``up``) the running local stack's, so that its rows carry the stack's time."""
        if self.shiftable_clock:
            return True
        stack = self.stack()
        return bool(stack.get("shiftable_clock")) and not stack.get("stopped")

    def resolved_webhook_allow_private_networks(self) -> bool:
        if self.webhook_allow_private_networks is not None:
            return self.webhook_allow_private_networks
        stack = self.stack()
        return bool(stack) and not stack.get("stopped")

    def resolved_stripe_api_key(self) -> str | None:
        """The configured key, else the key of the emulator a running ``up`` started."""
        if self.stripe_api_key is not None:
            return self.stripe_api_key.get_secret_value()
        stack = self.stack()
        recorded = stack.get("stripe_emulator_api_key")
        if recorded and stack.get("stripe_emulator_url") and not stack.get("stopped"):
            return str(recorded)
        return None

    def resolved_stripe_api_base(self) -> str | None:
        if self.stripe_api_base:
            return self.stripe_api_base
        if self.stripe_api_key is not None:
            return None
        recorded = self.stack().get("stripe_emulator_url")
        return str(recorded) if recorded else None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()


def masked_url(url: str) -> str:
    """``url`` with its password shown as ``***``: what is printed of a URL (an error may name
    the URL it tried; ``up``'s banner names Redis's and the database's)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
        return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))
    except ValueError:
        return "(an unreadable URL)"
