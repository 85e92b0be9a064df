"""Settings, read from the environment with the ``BILLING_`` prefix, in sections: one per wing
(``storage``, ``messaging``, ``provider``, ``rules``, ``sweeps``, ``outbound``, ``api``,
``processes``), under the same ``BILLING_*`` names.

Every default is the embedded one, so nothing needs configuring to start: the data directory
holds the SQLite database and the embedded Redis; with no Stripe key the Stripe emulator
started by ``billing-worker up`` is used.

The settings are values read from the environment, nothing more: they never read the local
stack's ``stack.json``. A command beside a running ``up`` (the CLI) resolves the stack once
(:func:`worker.local.stack_state.stack_settings`); the processes ``up`` starts are handed
theirs in their environment. The composition root (``worker/bootstrap.py``) hands each adapter
its values; no adapter reads the settings itself.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic_settings import SettingsConfigDict

from adapters.urls import masked_url
from worker.settings.api import ApiSettings, address_networks
from worker.settings.messaging import DEFAULT_REDIS_URL, MessagingSettings
from worker.settings.outbound import OutboundSettings
from worker.settings.processes import ProcessSettings
from worker.settings.provider import ProviderSettings
from worker.settings.rules import BillingRulesSettings
from worker.settings.section import ENV_PREFIX, Section
from worker.settings.storage import DATA_DIR_NAME, STACK_FILE, StorageSettings, default_data_dir
from worker.settings.sweeps import SweepSettings

__all__ = [
    "DATA_DIR_NAME",
    "DEFAULT_REDIS_URL",
    "ENV_PREFIX",
    "SECTIONS",
    "STACK_FILE",
    "ApiSettings",
    "BillingRulesSettings",
    "MessagingSettings",
    "OutboundSettings",
    "ProcessSettings",
    "ProviderSettings",
    "Section",
    "Settings",
    "StorageSettings",
    "SweepSettings",
    "address_networks",
    "default_data_dir",
    "get_settings",
    "masked_url",
]

SECTIONS: tuple[type[Section], ...] = (
    StorageSettings,
    MessagingSettings,
    ProviderSettings,
    BillingRulesSettings,
    SweepSettings,
    OutboundSettings,
    ApiSettings,
    ProcessSettings,
)
"""The sections, in the order the settings reference lists them."""


class Settings(
    ProcessSettings,
    ApiSettings,
    OutboundSettings,
    SweepSettings,
    BillingRulesSettings,
    ProviderSettings,
    MessagingSettings,
    StorageSettings,
):
    """Every section at once: what a process reads from its environment. Each adapter is
    handed the values of its own section (it declares them as a ``Protocol``)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once from its environment."""
    return Settings()
