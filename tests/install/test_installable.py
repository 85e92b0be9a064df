"""Every locked package installs from a wheel whose hash is in the lock, on every platform and
Python we support: CPython 3.11-3.14 on Linux (x86_64, aarch64) and macOS (x86_64, arm64).

``pip download --only-binary=:all:`` fetches, for each target, the wheel pip would install
there. Markers are evaluated for the target, not this host (pip would evaluate them for the
host), and ``--no-deps`` keeps pip to the lock's own list. Every target downloads into one
directory, where pip reuses a file already there whose hash it knows, so a pure-Python or
``abi3`` wheel is downloaded once: the first target runs alone, then the four platforms run
concurrently, their Pythons one after another. The package index must be reachable: without
one the test skips locally and fails in CI (``CI=true``).
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.lockfile import DEV_LOCK, read_lock, target_environment
from tests.support.package_index import require_package_index

PYTHONS = ("3.11", "3.12", "3.13", "3.14")
# About 500 MB of wheels: a few minutes where pip's HTTP cache is cold (or, as behind some
# proxies, never filled).
pytestmark = [pytest.mark.install, pytest.mark.timeout(1200)]


def _manylinux_tags(machine: str) -> list[str]:
    """glibc 2.28 (e.g. Debian 10, RHEL 8) and every older manylinux tag it accepts: pip
    expands a macOS tag to older releases by itself, not a ``manylinux_2_X`` one."""
    tags = [f"manylinux_2_{minor}_{machine}" for minor in range(28, 16, -1)]
    tags.append(f"manylinux2014_{machine}")
    return tags


@dataclass(frozen=True)
class Platform:
    name: str
    sys_platform: str
    machine: str
    pip_tags: tuple[str, ...]


PLATFORMS = (
    Platform("linux-x86_64", "linux", "x86_64", tuple(_manylinux_tags("x86_64"))),
    Platform("linux-aarch64", "linux", "aarch64", tuple(_manylinux_tags("aarch64"))),
    Platform("macos-x86_64", "darwin", "x86_64", ("macosx_11_0_x86_64",)),
    Platform("macos-arm64", "darwin", "arm64", ("macosx_11_0_arm64",)),
)
TARGETS = [(python, platform) for python in PYTHONS for platform in PLATFORMS]


Outcome = tuple[int, str]


def _download(python: str, platform: Platform, workdir: Path) -> Outcome:
    environment = target_environment(python, platform.sys_platform, platform.machine)
    needed = [package for package in read_lock(DEV_LOCK) if package.needed_on(environment)]
    requirements = workdir / f"cp{python.replace('.', '')}-{platform.name}.txt"
    requirements.write_text("".join(f"{p.requirement_line()}\n" for p in needed))
    platform_options = [option for tag in platform.pip_tags for option in ("--platform", tag)]
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--only-binary=:all:",
            "--require-hashes",
            "--implementation",
            "cp",
            "--python-version",
            python,
            *platform_options,
            "--dest",
            str(workdir / "wheels"),
            "--requirement",
            str(requirements),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    # pip warns about every unreachable extra index of the local configuration: not the point.
    output = [
        line
        for line in (completed.stdout + completed.stderr).splitlines()
        if not line.startswith("WARNING: Location")
    ]
    return completed.returncode, "\n".join(output)


@pytest.fixture(scope="module")
def downloads(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    require_package_index("the installability check")
    workdir = tmp_path_factory.mktemp("installable")
    first_python, first_platform = TARGETS[0]
    outcomes = {_key(first_python, first_platform): _download(*TARGETS[0], workdir)}

    def each_python_on(platform: Platform) -> dict[str, Outcome]:
        return {
            _key(python, platform): _download(python, platform, workdir)
            for python in PYTHONS
            if (python, platform) != TARGETS[0]
        }

    with ThreadPoolExecutor(len(PLATFORMS)) as pool:
        for platform_outcomes in pool.map(each_python_on, PLATFORMS):
            outcomes.update(platform_outcomes)
    return outcomes


def _key(python: str, platform: Platform) -> str:
    return f"{python}-{platform.name}"


@pytest.mark.parametrize(
    ("python", "platform"), TARGETS, ids=[f"cp{p}-{pl.name}" for p, pl in TARGETS]
)
def test_every_locked_package_has_a_hashed_wheel_for(
    downloads: dict[str, Outcome], python: str, platform: Platform
) -> None:
    returncode, output = downloads[_key(python, platform)]
    assert returncode == 0, output
