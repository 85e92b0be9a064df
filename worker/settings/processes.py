"""The processes and what watches them: Flower, the metrics exporters, log lines, masking, the
local stack's clock (``worker/launch``, ``worker/local``, ``adapters/observability``).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, SecretStr

from worker.settings.section import Section


class ProcessSettings(Section):
    """The processes and what watches them: Flower, the metrics exporters, log lines, masking, the
    local stack's clock (``worker/launch``, ``worker/local``, ``adapters/observability``).
    """

    title: ClassVar[str] = "Processes"

    flower_port: int = Field(default=5555, description="Port of Flower.")
    flower_user: str = Field(default="admin", description="Flower basic-auth user.")
    flower_password: SecretStr | None = Field(
        default=None,
        description="Flower basic-auth password; if unset, `up` makes one and keeps it in the "
        "data directory (`flower-password`) for every later `up`.",
    )
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
    shiftable_clock: bool = Field(
        default=False,
        description="Local stack and tests only: let `clock advance` shift "
        "the application clock. Production keeps real time.",
    )
    heartbeat_interval_seconds: float = Field(
        default=10.0,
        gt=0,
        description="How often each long-running loop (a worker node's consumer, beat, the "
        "failover watch, the API's result listener) records its heartbeat in Redis. A worker "
        "node's is a message through its own queue, run by its pool: it proves the node "
        "consumes, not only that it runs.",
    )
    loop_silence_seconds: float = Field(
        default=60.0,
        gt=0,
        description="A loop whose last heartbeat is older than this (or than two of its "
        "intervals, for a sweep that runs less often) is silent: `billing_loop_silent` is 1 "
        "in beat's metrics, `/readyz` names it and alert BillingLoopSilent fires. Keep it "
        "several times BILLING_HEARTBEAT_INTERVAL_SECONDS.",
    )
