"""Running Alembic migrations from code (``billing-worker migrate``, ``up``, the tests)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from worker.settings import get_settings

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str | None = None, revision: str = "head") -> None:
    """Bring the database at ``url`` (default: the settings') to ``revision``."""
    url = url or get_settings().resolved_database_url()
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(url), revision)
