"""The settings' environment variables (``BILLING_*``) a test runs with: never the
developer's own, only those the test gives."""

from __future__ import annotations

import os
from collections.abc import Mapping

import pytest

PREFIX = "BILLING_"


def settings_environment(settings: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child process: this one's without any ``BILLING_*`` variable,
    plus ``settings``."""
    clean = {name: value for name, value in os.environ.items() if not name.startswith(PREFIX)}
    return {**clean, **(settings or {})}


def clear_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove every ``BILLING_*`` variable from this process's environment for the test."""
    for name in list(os.environ):
        if name.startswith(PREFIX):
            monkeypatch.delenv(name)
