"""The package index pip uses here, for the tests that install from it: they skip locally
when it cannot be reached, and fail in CI (``CI=true``), where it must be."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
DEFAULT_INDEX = "https://pypi.org/simple/"


def index_url() -> str:
    """The index pip uses here: ``PIP_INDEX_URL``, else pip's configuration, else PyPI."""
    if url := os.environ.get("PIP_INDEX_URL"):
        return url
    configured = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    ).stdout
    match = re.search(r"^[^.\s]*\.index-url='([^']+)'$", configured, re.MULTILINE)
    return match.group(1) if match else DEFAULT_INDEX


def index_unreachable(url: str) -> str | None:
    """None when the index answers, else why not."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/pip/", timeout=15):  # noqa: S310
            return None
    except (urllib.error.URLError, OSError) as error:
        return f"package index {url} not reachable: {error}"


def require_package_index(what: str) -> None:
    """Skip the test (locally) or fail it (in CI) unless the package index answers."""
    unreachable = index_unreachable(index_url())
    if unreachable:
        if IN_CI:
            pytest.fail(f"{what} needs the package index in CI: {unreachable}")
        pytest.skip(unreachable)
