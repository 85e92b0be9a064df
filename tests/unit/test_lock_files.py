"""The lock files agree with pyproject.toml and with each other (``python3 -m worker.dev lock``
refreshes them); whether they install everywhere is tests/install's question."""

from __future__ import annotations

import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.lockfile import DEV_LOCK, ROOT, RUNTIME_LOCK, LockedPackage, read_lock

PROJECT = canonicalize_name("billing-worker")


def _declared(*extras: str) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [Requirement(spec) for spec in project["dependencies"]]
    for extra in extras:
        for spec in project["optional-dependencies"][extra]:
            requirement = Requirement(spec)
            if canonicalize_name(requirement.name) == PROJECT:
                declared += _declared(*requirement.extras)
            else:
                declared.append(requirement)
    return declared


def _by_name(packages: list[LockedPackage]) -> dict[str, LockedPackage]:
    return {package.name: package for package in packages}


def _stale(declared: list[Requirement], locked: dict[str, LockedPackage]) -> list[str]:
    return [
        str(requirement)
        for requirement in declared
        if (package := locked.get(canonicalize_name(requirement.name))) is None
        or not requirement.specifier.contains(package.version, prereleases=True)
    ]


def test_every_runtime_dependency_is_locked_within_its_declared_range() -> None:
    assert _stale(_declared(), _by_name(read_lock(RUNTIME_LOCK))) == []


def test_every_dev_and_test_dependency_is_locked_within_its_declared_range() -> None:
    assert _stale(_declared("dev"), _by_name(read_lock(DEV_LOCK))) == []


def test_the_runtime_lock_pins_what_the_dev_lock_pins() -> None:
    dev = _by_name(read_lock(DEV_LOCK))
    differing = [
        (package.name, package.version, dev[package.name].version if package.name in dev else None)
        for package in read_lock(RUNTIME_LOCK)
        if package.name not in dev or dev[package.name].version != package.version
    ]
    assert differing == []


def test_every_locked_package_carries_hashes() -> None:
    unhashed = [p.name for p in read_lock(DEV_LOCK) + read_lock(RUNTIME_LOCK) if not p.hashes]
    assert unhashed == []
