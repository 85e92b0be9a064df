"""promtool (Debian package ``prometheus``), for the tests of the alert rules and the
dashboard: skipped where it is missing, a failure in CI (``CI=true``; ``.ci/run`` installs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if IN_CI:
            pytest.fail("promtool is required in CI (Debian package prometheus; .ci/run)")
        pytest.skip("promtool not found (apt-get install --no-install-recommends prometheus)")
    return found


def run_promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
