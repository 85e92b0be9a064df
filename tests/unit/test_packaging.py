"""Both distributions build without setuptools' deprecation warnings about their license
(the ``license = {text = ...}`` table, deprecated by PEP 639), and ``billing-worker`` has a
version read from the package's metadata."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("pyproject", ["pyproject.toml", "stripe_emulator/pyproject.toml"])
def test_a_license_is_an_spdx_expression_that_the_build_backend_reads(pyproject: str) -> None:
    loaded = tomllib.loads((ROOT / pyproject).read_text())
    project = loaded["project"]

    assert isinstance(project["license"], str)  # PEP 639: an expression, not a table
    assert not [c for c in project.get("classifiers", []) if c.startswith("License ::")]
    # setuptools reads license expressions from 77 on; older ones would reject the string.
    assert "setuptools>=77" in loaded["build-system"]["requires"]


def test_billing_worker_version_prints_the_installed_distribution_s_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "worker.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"billing-worker, version {version('billing-worker')}"
