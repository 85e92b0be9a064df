"""The documentation site builds warning-free: ``mkdocs build --strict`` (broken links and
anchors, pages left out of the navigation and unknown markup are all failures)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_documentation_site_builds_in_strict_mode(tmp_path: Path) -> None:
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "reference" / "settings" / "index.html").exists()


def test_every_link_of_the_readme_into_the_docs_names_a_page_of_the_site() -> None:
    readme = (ROOT / "README.md").read_text()
    linked = re.findall(r"\]\((docs/[^)#]+)", readme)

    assert linked, "the README links into the docs"
    assert [path for path in linked if not (ROOT / path).is_file()] == []
