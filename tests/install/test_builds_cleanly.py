"""Both distributions build from a clean copy of the checkout, as a release or the Docker
image builds them, without setuptools' warnings (PEP 639: a license table is deprecated,
``license`` is an SPDX expression). pip fetches the build backend from the package index."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.package_index import require_package_index

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.install, pytest.mark.timeout(600)]


@pytest.mark.parametrize("package", [".", "stripe_emulator"])
def test_a_wheel_builds_without_a_setuptools_warning(package: str, tmp_path: Path) -> None:
    require_package_index("building a wheel")
    source = tmp_path / "source"
    archive = subprocess.run(
        ["git", "archive", "--format=tar", "HEAD"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    source.mkdir()
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)

    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp_path), "."],
        cwd=source / package,
        capture_output=True,
        text=True,
        check=False,
    )

    assert built.returncode == 0, built.stdout + built.stderr
    assert list(tmp_path.glob("*.whl"))
    warned = [
        line.strip()
        for line in (built.stdout + built.stderr).splitlines()
        if "Warning:" in line and "setuptools" in line
    ]
    assert warned == []
