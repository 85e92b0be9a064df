"""Running the system and its parts: ``up``, ``worker``, ``beat``, ``api``, ``flower``,
``migrate`` and ``stripe-emulator``."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import click

from worker.cli.base import DATA_DIR, DATABASE_ENV, REDIS_ENV, STRIPE_ENV, BillingGroup
from worker.launch.command_lines import (
    API_HTTP_PROTOCOL,
    MAX_REQUEST_HEAD_BYTES,
    api_metrics_env,
    celery_beat_argv,
    celery_worker_argv,
    flower_argv,
    flower_env,
    worker_metrics_env,
)
from worker.launch.private import create_files_for_owner_only
from worker.settings import get_settings

WORKER_ENV = (
    *DATABASE_ENV,
    *REDIS_ENV,
    *STRIPE_ENV,
    "BILLING_RETRY_MAX_ATTEMPTS",
    "BILLING_RETRY_BASE_DELAY_SECONDS",
    "BILLING_RETRY_MAX_DELAY_SECONDS",
    "BILLING_BROKER_VISIBILITY_TIMEOUT_SECONDS",
    "BILLING_DEFAULT_CURRENCY",
    "BILLING_PRORATION_BEHAVIOR",
    "BILLING_WORKER_METRICS_PORT",
    "BILLING_METRICS_HOST",
    "PROMETHEUS_MULTIPROC_DIR",
    "BILLING_LOG_LEVEL",
    "BILLING_LOG_FORMAT",
    "BILLING_MASK_PERSONAL_DATA",
)
API_ENV = (
    "BILLING_API_HOST",
    "BILLING_API_PORT",
    "BILLING_API_PROCESSES",
    "BILLING_API_TRUSTED_PROXIES",
    "PROMETHEUS_MULTIPROC_DIR",
    *DATABASE_ENV,
    *REDIS_ENV,
    "BILLING_HTTP_WAIT_TIMEOUT_SECONDS",
    "BILLING_API_READ_TIMEOUT_SECONDS",
    "BILLING_AUTH_CACHE_SECONDS",
    "BILLING_AUTH_MAX_FAILURES_PER_SOURCE_AND_CLIENT",
    "BILLING_AUTH_MAX_FAILURES_PER_SOURCE",
    "BILLING_LOG_LEVEL",
    "BILLING_LOG_FORMAT",
    "BILLING_MASK_PERSONAL_DATA",
)
FLOWER_ENV = (
    "BILLING_FLOWER_PORT",
    "BILLING_FLOWER_USER",
    "BILLING_FLOWER_PASSWORD",
    "BILLING_API_HOST",
    *REDIS_ENV,
)
BEAT_ENV = (
    *REDIS_ENV,
    "BILLING_BEAT_INTERVAL_SECONDS",
    "BILLING_SCHEDULED_CHANGES_INTERVAL_SECONDS",
    "BILLING_STALLED_COMMAND_SECONDS",
    "BILLING_BEAT_METRICS_PORT",
    "BILLING_METRICS_HOST",
    "BILLING_LOG_LEVEL",
    "BILLING_LOG_FORMAT",
    "BILLING_MASK_PERSONAL_DATA",
)


def register(main: BillingGroup) -> None:
    for command in (up, worker, beat, api, flower, migrate, stripe_emulator):
        main.add_command(command)


@click.command(
    cls=BillingGroup.command_class,
    settings_env=(
        *WORKER_ENV,
        *API_ENV,
        *FLOWER_ENV,
        *BEAT_ENV,
        "and every other BILLING_* setting",
    ),
)
@click.option(
    "--api-port", type=int, envvar="BILLING_API_PORT", show_envvar=True, help="The API's port."
)
@click.option(
    "--flower-port",
    type=int,
    envvar="BILLING_FLOWER_PORT",
    show_envvar=True,
    help="Flower's port.",
)
@click.option("--concurrency", type=int, default=2, show_default=True, help="Worker processes.")
@click.option(
    "--fresh",
    is_flag=True,
    help="Start over: first wipe the data directory's database, Redis data (queues, dead "
    "letters, the clock's offset), emulator state and demo secret; the logs stay. Refused "
    "while a stack runs on it, or when BILLING_DATABASE_URL or BILLING_REDIS_URL names "
    "another database or Redis.",
)
@click.option("--yes", "-y", "assume_yes", is_flag=True, help="With --fresh: wipe without asking.")
@click.option(
    "--ha",
    is_flag=True,
    help="Redis with failover: a primary, a replica and three sentinels (the same embedded "
    "server) instead of one Redis; every process finds the primary through the sentinels, "
    "so killing the primary leaves the stack working. Refused when BILLING_REDIS_URL or "
    "BILLING_REDIS_SENTINELS names another Redis.",
)
def up(
    api_port: int | None,
    flower_port: int | None,
    concurrency: int,
    fresh: bool,
    assume_yes: bool,
    ha: bool,
) -> None:
    """Run everything on embedded defaults: Redis, SQLite, migrations, Stripe emulator,
    worker, beat, API and Flower, with demo data (`billing-worker demo`). Ctrl-C or
    `billing-worker down` stops it all; `up` again resumes where it stopped, `up --fresh`
    starts over."""
    from worker.local.data_dir import wipe_data_dir
    from worker.local.stack_lock import hold
    from worker.local.start import LocalStack

    settings = get_settings()
    overrides = {}
    if api_port:
        overrides["api_port"] = api_port
    if flower_port:
        overrides["flower_port"] = flower_port
    if assume_yes and not fresh:
        raise click.UsageError("--yes goes with --fresh")
    chosen = settings.model_copy(update=overrides)
    # One stack per data directory: held from here on, before anything is wiped or started
    # (a second `up` exits with one line naming the running stack), and by every child.
    lock = hold(
        settings.data_dir,
        {"pid": os.getpid(), "api_url": f"http://{chosen.api_host}:{chosen.api_port}"},
    )
    if fresh:
        _confirm_fresh(settings.data_dir, assume_yes)
    stack = LocalStack(chosen, concurrency=concurrency, ha=ha)
    stack.group.pass_fds = (lock.fd,)
    if fresh:
        removed = wipe_data_dir(settings)
        click.echo(f"wiped {settings.data_dir.resolve()}: {', '.join(removed) or 'nothing yet'}")

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        stack.start(echo=click.echo)
        stack.watch()  # until Ctrl-C or SIGTERM: a child that exits is started again
    except KeyboardInterrupt:
        click.echo("\nstopping…")
    finally:
        stack.stop()
        click.echo("stopped.")


def _confirm_fresh(data_dir: Path, assume_yes: bool) -> None:
    """``--fresh`` wipes data: asked on a terminal, refused elsewhere without ``--yes``."""
    if assume_yes:
        return
    where = data_dir.resolve()
    if not sys.stdin.isatty():
        raise click.UsageError(
            f"--fresh wipes {where}: add --yes to confirm (stdin is no terminal)"
        )
    click.confirm(
        f"Wipe the database, Redis data, emulator state and clock of {where}?", abort=True
    )


@click.command(
    cls=BillingGroup.command_class,
    settings_env=WORKER_ENV,
    context_settings={"ignore_unknown_options": True},
)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker(celery_args: tuple[str, ...]) -> None:
    """Run a Celery worker on every queue (extra arguments go to `celery worker`)."""
    create_files_for_owner_only()  # what it writes in the data directory is private
    from adapters.observability.metrics import MULTIPROC_DIR_ENV

    settings = get_settings()
    if settings.worker_metrics_port:
        # Before the worker starts: its processes choose where their values go at import.
        directory = os.environ.get(MULTIPROC_DIR_ENV) or str(
            settings.data_dir / "metrics" / f"worker-{settings.worker_metrics_port}"
        )
        os.environ.update(worker_metrics_env(settings.worker_metrics_port, Path(directory)))
    argv = celery_worker_argv(loglevel=settings.log_level, log_format=settings.log_format)
    os.execv(argv[0], [*argv, *celery_args])


@click.command(cls=BillingGroup.command_class, settings_env=BEAT_ENV)
def beat() -> None:
    """Run celery beat (the periodic sweeps)."""
    create_files_for_owner_only()  # what it writes in the data directory is private
    settings = get_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    argv = celery_beat_argv(
        settings.data_dir / "celerybeat-schedule", settings.log_level, settings.log_format
    )
    os.execv(argv[0], argv)


@click.command(cls=BillingGroup.command_class, settings_env=API_ENV)
@click.option("--host", default=None, help="[env BILLING_API_HOST; default 127.0.0.1]")
@click.option("--port", type=int, default=None, help="[env BILLING_API_PORT; default 8080]")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=None,
    help="API processes on the one port [env BILLING_API_PROCESSES; default 1].",
)
def api(host: str | None, port: int | None, workers: int | None) -> None:
    """Run the HTTP API (uvicorn). With several processes (`--workers N`), uvicorn's
    supervisor starts them on the one port and restarts one that dies; `/metrics` adds up
    all of them (PROMETHEUS_MULTIPROC_DIR, default `<data_dir>/metrics/api-<port>`, emptied
    at start) and the failed-authentication throttle is shared through Redis."""
    create_files_for_owner_only()  # what it writes in the data directory is private
    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    from adapters.observability.metrics import MULTIPROC_DIR_ENV

    settings = get_settings()
    port = port or settings.api_port
    processes = workers or settings.api_processes
    named = os.environ.get(MULTIPROC_DIR_ENV)
    if processes > 1 or named:
        # Before the processes start: each chooses where its values go when it imports them;
        # emptied, or an earlier run's values (a restarted container's) would be added.
        directory = named or str(settings.data_dir / "metrics" / f"api-{port}")
        os.environ.update(api_metrics_env(Path(directory)))
    if processes > 1:
        # The supervisor never builds the app: its own lines (a process started, restarted,
        # stopped) are in the configured format only if it configures logging itself.
        from worker.process_signals import configure_logging

        configure_logging()
    uvicorn.run(
        "worker.api.app:asgi_app",
        factory=True,
        host=host or settings.api_host,
        port=port,
        workers=processes,
        log_config=None if processes > 1 else LOGGING_CONFIG,
        access_log=False,
        http=API_HTTP_PROTOCOL,  # bounds the request head's size and time (embedded.api_argv)
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,
        # The app reads X-Forwarded-For, from trusted proxies only (worker/api/sources.py).
        proxy_headers=False,
    )


@click.command(cls=BillingGroup.command_class, settings_env=FLOWER_ENV)
@click.option("--port", type=int, default=None, help="[env BILLING_FLOWER_PORT; default 5555]")
def flower(port: int | None) -> None:
    """Run Flower, with basic auth from BILLING_FLOWER_USER / BILLING_FLOWER_PASSWORD."""
    create_files_for_owner_only()  # what it writes in the data directory is private
    settings = get_settings()
    if settings.flower_password is None:
        raise click.UsageError("set BILLING_FLOWER_PASSWORD")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    argv = flower_argv(
        settings.api_host, port or settings.flower_port, settings.data_dir / "flower.db"
    )
    env = {
        **os.environ,
        **flower_env(settings.flower_user, settings.flower_password.get_secret_value()),
    }
    os.execve(argv[0], argv, env)


@click.command(cls=BillingGroup.command_class, settings_env=DATABASE_ENV)
def migrate() -> None:
    """Apply database migrations."""
    create_files_for_owner_only()  # what it writes in the data directory is private
    from adapters.db.migrate import upgrade

    settings = get_settings()
    upgrade(settings.resolved_database_url())
    click.echo(f"migrated {settings.resolved_database_url()}")


@click.command(
    "stripe-emulator",
    cls=BillingGroup.command_class,
    settings_env=(DATA_DIR,),
    context_settings={"ignore_unknown_options": True},
    add_help_option=False,
)
@click.argument("emulator_args", nargs=-1, type=click.UNPROCESSED)
def stripe_emulator(emulator_args: tuple[str, ...]) -> None:
    """Run the Stripe emulator alone (`--help` lists its options: --host, --port, --api-key,
    --rate-limit, --state-file)."""
    create_files_for_owner_only()  # what it writes in the data directory is private
    from worker.local.start import require_emulator

    require_emulator()
    argv = [sys.executable, "-m", "stripe_emulator", *emulator_args]
    os.execv(argv[0], argv)
