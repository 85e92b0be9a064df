"""``billing-worker up``: the whole system on embedded defaults, as child processes.

The demo data it seeds is :mod:`worker.local.seed`; what it prints, :mod:`worker.local.banner`.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from worker.launch.command_lines import (
    api_argv,
    api_metrics_env,
    celery_beat_argv,
    celery_worker_argv,
    flower_argv,
    flower_env,
    worker_metrics_env,
)
from worker.launch.private import create_files_for_owner_only, make_private
from worker.local.banner import Started, banner
from worker.local.data_dir import EMULATOR_STATE_FILE, HA_DIRECTORY, kept_flower_password
from worker.local.embedded import (
    REDIS_PASSWORD_FILENAME,
    ProcessGroup,
    free_port,
    port_open,
    start_redis,
    wait_until,
)
from worker.local.ha import heal, kept_topology, recorded
from worker.local.seed import (
    DemoCredentials,
    seed_billing,
    seed_demo_client,
    seed_records,
    wire_stripe_events,
)
from worker.local.sentinel import MASTER_NAME, SentinelTopology
from worker.local.stack_clock import align_with_emulator, clock_offset
from worker.local.stack_state import read_stack, write_stack_file
from worker.local.supervisor import Supervisor
from worker.settings import Settings

EMULATOR_NOT_INSTALLED = (
    "the Stripe emulator is not installed: run `pip install -e ./stripe_emulator` "
    "(`python3 -m worker.dev up` does)"
)


def require_emulator(alternative: str = "") -> None:
    """Exit with one line (ending in ``alternative``, if any) unless the Stripe emulator is
    installed.

    It is a development tool with a distribution of its own (``stripe_emulator/``), absent from
    the production wheel and image, so ``worker`` imports it only where it runs it, after this.
    """
    if importlib.util.find_spec("stripe_emulator") is None:
        raise SystemExit(f"{EMULATOR_NOT_INSTALLED}{alternative}")


def emulator_api_key() -> str:
    """The secret key the Stripe emulator accepts."""
    require_emulator(", or set BILLING_STRIPE_API_KEY to use Stripe")
    from stripe_emulator import DEFAULT_API_KEY

    return DEFAULT_API_KEY


def children_log_format(settings: Settings) -> str:
    """The log format of the processes ``up`` starts: lines for a terminal, unless
    ``BILLING_LOG_FORMAT`` says otherwise (the separate processes of a deployment write JSON
    by default)."""
    return settings.log_format if "log_format" in settings.model_fields_set else "console"


def elapsed_since(start: float) -> str:
    return f"{time.monotonic() - start:.1f}s"


class LocalStack:
    def __init__(self, settings: Settings, *, concurrency: int = 2, ha: bool = False) -> None:
        self.settings = settings
        self.concurrency = concurrency
        self.group = ProcessGroup()
        self.topology: SentinelTopology | None = None
        """``ha``: the primary, replica and three sentinels every process finds Redis by."""
        if ha and (settings.redis_url or settings.redis_sentinels):
            raise SystemExit(
                "--ha starts its own primary, replica and sentinels; BILLING_REDIS_URL or "
                "BILLING_REDIS_SENTINELS names another Redis: unset it, or leave out --ha"
            )
        self.ha = ha
        self._reported_exits: set[int] = set()
        self.data_dir = settings.data_dir.resolve()
        # Checked here, before anything starts: without a Stripe key, `up` runs the emulator.
        self.emulator_key = emulator_api_key() if settings.stripe_api_key is None else None

    def start(self, echo: Callable[[str], None]) -> dict[str, Any]:
        began = time.monotonic()
        settings = self.settings
        # Before anything is made: every file of the stack, its children's included, is the
        # owner's alone, and what an earlier run left readable is tightened.
        create_files_for_owner_only()
        for path in make_private(self.data_dir):
            echo(f"warning: {path} is not yours: it stays readable by others")
        logs = self.data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        host = settings.api_host
        emulator_key = self.emulator_key
        for port, what in ((settings.api_port, "API"), (settings.flower_port, "Flower")):
            if port_open(host, port):
                raise SystemExit(
                    f"port {port} for the {what} is taken; choose another "
                    f"(--api-port / --flower-port)"
                )

        log_format = children_log_format(settings)
        env: dict[str, str] = {
            "BILLING_DATA_DIR": str(self.data_dir),
            "BILLING_LOG_FORMAT": log_format,
        }
        redis_settings: dict[str, Any]
        if self.ha:
            topology = self._start_topology()
            redis_url = ""
            env.update(topology.settings_env())
            redis_settings = {
                "redis_url": None,
                "redis_sentinels": topology.sentinel_addresses(),
                "redis_master_name": MASTER_NAME,
                "redis_password": SecretStr(topology.password),
                "redis_sentinel_password": SecretStr(topology.sentinel_password),
                "redis_socket_timeout_seconds": topology.socket_timeout_seconds,
            }
        else:
            redis_url = settings.redis_url or start_redis(
                self.group, self.data_dir / "redis", log_path=logs / "redis.log"
            )
            env["BILLING_REDIS_URL"] = redis_url
            redis_settings = {"redis_url": redis_url}

        emulator_url = self._start_emulator(env, logs) if emulator_key is not None else None
        # The local stack's receivers are on this machine (examples/webhook_receiver.py),
        # unless the setting says otherwise.
        allow_private = settings.webhook_allow_private_networks
        env["BILLING_WEBHOOK_ALLOW_PRIVATE_NETWORKS"] = (
            "true" if allow_private is None else str(allow_private).lower()
        )
        database_url = settings.resolved_database_url()
        env["BILLING_DATABASE_URL"] = database_url

        from adapters.db.migrate import upgrade

        upgrade(database_url)
        # Seeded with the settings the children get, so with the same (shiftable) clock.
        seeding = settings.model_copy(
            update={
                "data_dir": self.data_dir,
                **redis_settings,
                "database_url": database_url,
                "shiftable_clock": emulator_url is not None or settings.shiftable_clock,
            }
        )
        if emulator_url is not None:
            # Before anything reads the clock: the emulator's offset is the stack's, whichever
            # Redis (one server's data, or --ha's) this run keeps (worker/local/stack_clock.py).
            aligned = align_with_emulator(seeding, emulator_url)
            if aligned.changed:
                echo(aligned.explained())
        credentials, demo_billing = self._seed(seeding, emulator_url, echo)

        flower_password = (
            settings.flower_password.get_secret_value()
            if settings.flower_password
            else kept_flower_password(self.data_dir)
        )
        # Each exporter on the port its setting names, else on a free one.
        worker_metrics_port = settings.worker_metrics_port or free_port()
        beat_metrics_port = settings.beat_metrics_port or free_port()
        metrics_host = settings.metrics_host
        self.group.start(
            "worker",
            celery_worker_argv(
                concurrency=self.concurrency, loglevel=settings.log_level, log_format=log_format
            ),
            env={
                **env,
                **worker_metrics_env(worker_metrics_port, self.data_dir / "metrics" / "worker"),
            },
            log_path=logs / "worker.log",
        )
        self.group.start(
            "beat",
            celery_beat_argv(self.data_dir / "celerybeat-schedule", settings.log_level, log_format),
            env={**env, "BILLING_BEAT_METRICS_PORT": str(beat_metrics_port)},
            log_path=logs / "beat.log",
        )
        processes = settings.api_processes
        api_env = api_metrics_env(self.data_dir / "metrics" / "api") if processes > 1 else {}
        self.group.start(
            "api",
            api_argv(host, settings.api_port, processes),
            env={**env, **api_env},
            log_path=logs / "api.log",
        )
        self.group.start(
            "flower",
            flower_argv(host, settings.flower_port, self.data_dir / "flower.db"),
            env={**env, **flower_env(settings.flower_user, flower_password)},
            log_path=logs / "flower.log",
        )

        api_url = f"http://{host}:{settings.api_port}"
        metrics_urls = {
            "api": f"{api_url}/metrics",
            "worker": f"http://{metrics_host}:{worker_metrics_port}/metrics",
            "beat": f"http://{metrics_host}:{beat_metrics_port}/metrics",
        }
        recorded_ha = recorded(self.topology) if self.topology is not None else None
        stack = {
            "api_url": api_url,
            "flower_url": f"http://{host}:{settings.flower_port}",
            "redis_url": redis_url or None,
            "redis_ha": recorded_ha,
            "database_url": database_url,
            "stripe_emulator_url": emulator_url,
            "stripe_emulator_api_key": emulator_key,
            "shiftable_clock": seeding.shiftable_clock,
            "logs": str(logs),
            "metrics_urls": metrics_urls,
        }
        write_stack_file(settings, stack)
        wait_until(lambda: self._ready(api_url), 60, "the API (/readyz)", interval=0.2)

        started = Started(
            elapsed=elapsed_since(began),
            api_url=api_url,
            flower_url=str(stack["flower_url"]),
            flower_user=settings.flower_user,
            flower_password=flower_password,
            redis_url=redis_url,
            redis_password_file=(
                self.data_dir / HA_DIRECTORY
                if self.ha
                else None
                if settings.redis_url
                else self.data_dir / "redis" / REDIS_PASSWORD_FILENAME
            ),
            database_url=database_url,
            stripe_emulator_url=emulator_url,
            logs=logs,
            metrics_urls=metrics_urls,
            credentials=credentials,
            demo_billing=demo_billing,
            clock_offset_seconds=clock_offset(seeding) if seeding.shiftable_clock else None,
            redis_ha=recorded_ha,
        )
        for line in banner(started):
            echo(line)
        return stack

    def _start_topology(self) -> SentinelTopology:
        """``--ha``: the primary, the replica and three sentinels, their data kept in the data
        directory (the primary when the stack last stopped starts as the primary)."""
        topology = kept_topology(self.data_dir / HA_DIRECTORY)
        topology.pass_fds = self.group.pass_fds
        self.topology = topology  # stopped by stop(), even when the start fails half-way
        topology.start()
        return topology

    def _start_emulator(self, env: dict[str, str], logs: Path) -> str:
        """Start the Stripe emulator (its data and clock kept in the data directory); its URL.
        The children get its key and base, and a clock that moves with it."""
        key = str(self.emulator_key)
        port = free_port()
        self.group.start(
            "stripe-emulator",
            [
                sys.executable,
                "-m",
                "stripe_emulator",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--api-key",
                key,
                "--state-file",
                str(self.data_dir / EMULATOR_STATE_FILE),
            ],
            log_path=logs / "stripe-emulator.log",
        )
        env["BILLING_STRIPE_API_KEY"] = key
        env["BILLING_STRIPE_API_BASE"] = f"http://127.0.0.1:{port}"
        env["BILLING_SHIFTABLE_CLOCK"] = "true"
        return f"http://127.0.0.1:{port}"

    def _seed(
        self, settings: Settings, emulator_url: str | None, echo: Callable[[str], None]
    ) -> tuple[DemoCredentials, bool]:
        """The demo data (made where missing); the demo client's credentials and whether the
        demo's billing exists."""
        from worker.bootstrap import build_services

        svc = build_services(settings)
        seed_records(svc)
        credentials = seed_demo_client(settings, svc)
        if emulator_url is None or self.emulator_key is None:
            return credentials, False
        from adapters.provider.stripe_adapter import StripeBillingProvider

        wait_until(
            lambda: port_open("127.0.0.1", int(emulator_url.rsplit(":", 1)[1])),
            30,
            "stripe emulator",
        )
        provider = StripeBillingProvider(self.emulator_key, api_base=emulator_url, timeout=10)
        billing_svc = build_services(settings, provider=provider)
        demo_billing = False
        try:
            seed_billing(billing_svc)
            demo_billing = True
        except Exception as error:  # the stack is still useful without the demo
            echo(f"warning: could not make the demo subscription: {error}")
        host = self.settings.api_host
        reachable = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        try:
            wire_stripe_events(
                billing_svc, f"http://{reachable}:{self.settings.api_port}/webhooks/stripe"
            )
        except Exception as error:  # the sweep still brings Stripe's changes in
            echo(f"warning: could not register the emulator's webhooks: {error}")
        return credentials, demo_billing

    def _ready(self, api_url: str) -> bool:
        failed = self.group.exited()
        if failed:
            name, code = failed[0]
            raise SystemExit(
                f"{name} exited with {code} during start-up; see "
                f"{self.data_dir / 'logs' / (name + '.log')}"
            )
        try:
            return httpx.get(f"{api_url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def watch(self) -> None:
        """Block until interrupted, starting again every child that exits
        (:mod:`worker.local.supervisor`: one process's exit does not stop the others). With
        ``--ha`` a server or sentinel that dies is started again too, once the sentinels have
        promoted the replica (:meth:`_heal`)."""
        supervisor = Supervisor(
            self.group, self.data_dir / "logs", lambda line: print(line, file=sys.stderr)
        )
        while True:
            time.sleep(0.5)
            supervisor.tend()
            if self.topology is not None:
                self._heal(self.topology)

    def _heal(self, topology: SentinelTopology) -> None:
        """Start again what died of the topology, saying so, and record what changed in
        ``stack.json`` for ``billing-worker status`` (:func:`worker.local.ha.heal`)."""
        stack = read_stack(self.settings.data_dir)
        now = heal(
            topology,
            stack.get("redis_ha") or {},
            self._reported_exits,
            lambda line: print(line, file=sys.stderr),
        )
        if now is not None:
            write_stack_file(self.settings, {**stack, "redis_ha": now})

    def stop(self) -> None:
        self.group.stop()
        if self.topology is not None:  # after the processes that use it
            self.topology.stop()
        stack = read_stack(self.settings.data_dir)
        if stack:
            write_stack_file(self.settings, {**stack, "stopped": True})
