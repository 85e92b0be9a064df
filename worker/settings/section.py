"""What every section of the settings shares: the environment's ``BILLING_`` prefix."""

from __future__ import annotations

from typing import ClassVar

from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "BILLING_"


class Section(BaseSettings):
    """A section of the settings, one per wing: read from the environment on its own (an
    adapter's test can build just its section), or as a part of
    :class:`worker.settings.Settings`."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    title: ClassVar[str] = "Settings"
    """The section's heading on the settings reference page."""
