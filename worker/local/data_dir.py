"""The data directory of a local stack: what ``up`` keeps there across runs (Flower's
password), what ``up --fresh`` wipes, and the names of the files the stack's parts keep."""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

from worker.local.seed import DEMO_CLIENT_FILE
from worker.settings import STACK_FILE, Settings

EMULATOR_STATE_FILE = "stripe-emulator.json"
HA_DIRECTORY = "redis-ha"
"""``up --ha``'s primary, replica and sentinels: their data, configurations, passwords."""

FRESH_WIPES = (
    "billing.db",
    "billing.db-journal",
    "billing.db-wal",
    "billing.db-shm",
    "redis",
    HA_DIRECTORY,
    EMULATOR_STATE_FILE,
    DEMO_CLIENT_FILE,
    "celerybeat-schedule",
    "flower.db",
    "metrics",
    STACK_FILE,
)
"""What ``up --fresh`` removes from the data directory (each if present; ``celerybeat-schedule``
and ``flower.db`` with their suffixed siblings): the SQLite database, Redis's data (the queues,
the dead letters, the clock's offset), the emulator's state (its data and clock), the demo
client's secret, beat's and Flower's state. The logs stay."""


FLOWER_PASSWORD_FILE = "flower-password"  # noqa: S105 - a file name, not a password


def kept_flower_password(data_dir: Path) -> str:
    """Flower's password when ``BILLING_FLOWER_PASSWORD`` is unset: made once and kept (0600)
    in the data directory, so that every ``up`` on it (``--fresh`` too: it wipes data, not
    logins) keeps the password an operator saved in a browser."""
    path = data_dir / FLOWER_PASSWORD_FILE
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(12))
    return path.read_text().strip()


def wipe_data_dir(settings: Settings) -> list[str]:
    """``up --fresh``: remove :data:`FRESH_WIPES` from the data directory; the names removed.

    Refused (``SystemExit``, one line) when the database or Redis is not the data directory's
    own (``BILLING_DATABASE_URL``, ``BILLING_REDIS_URL``: they are not ours to wipe). A stack
    still running on it is refused before, by the data directory's lock ``up`` takes
    (:mod:`worker.local.stack_lock`): it is not stopped for you."""
    for setting, value in (
        ("BILLING_DATABASE_URL", settings.database_url),
        ("BILLING_REDIS_URL", settings.redis_url),
    ):
        if value:
            raise SystemExit(
                f"--fresh wipes only the data directory's own database and Redis; {setting} "
                "names another: unset it, or reset that one yourself"
            )
    removed = []
    data_dir = settings.data_dir
    for name in FRESH_WIPES:
        for path in sorted(data_dir.glob(f"{name}*")) if data_dir.is_dir() else []:
            if path.name != name and name not in ("celerybeat-schedule", "flower.db"):
                continue  # billing.db matches billing.db-wal: each is listed on its own
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
            removed.append(path.name)
    return removed
