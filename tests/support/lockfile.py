"""Reading the hashed lock files that ``python3 -m worker.dev lock`` writes (``uv pip compile
--universal --generate-hashes``): one pinned requirement per entry, with its environment
marker and the hashes of every file of that release."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
DEV_LOCK = ROOT / "requirements" / "dev.lock"
RUNTIME_LOCK = ROOT / "requirements" / "runtime.lock"


@dataclass(frozen=True)
class LockedPackage:
    requirement: Requirement
    hashes: tuple[str, ...]

    @property
    def name(self) -> str:
        return canonicalize_name(self.requirement.name)

    @property
    def version(self) -> str:
        (pin,) = self.requirement.specifier
        return pin.version

    def needed_on(self, environment: dict[str, str]) -> bool:
        marker = self.requirement.marker
        return marker is None or marker.evaluate(environment)

    def requirement_line(self) -> str:
        """The entry without its marker, for a requirements file of one known target."""
        hashes = " ".join(f"--hash={digest}" for digest in self.hashes)
        return f"{self.requirement.name}=={self.version} {hashes}"


def read_lock(path: Path) -> list[LockedPackage]:
    logical_lines = path.read_text().replace("\\\n", " ").splitlines()
    packages = []
    for line in logical_lines:
        if not line[:1].isalnum():
            continue  # comments ("# via ...") and blank lines
        spec, *hash_options = line.split("--hash=")
        packages.append(
            LockedPackage(Requirement(spec.strip()), tuple(h.strip() for h in hash_options))
        )
    return packages


def target_environment(python_version: str, sys_platform: str, machine: str) -> dict[str, str]:
    """The marker environment of CPython ``python_version`` on another machine: markers are
    evaluated for the target, never for the host that runs the check."""
    return {
        "implementation_name": "cpython",
        "implementation_version": f"{python_version}.0",
        "platform_python_implementation": "CPython",
        "python_version": python_version,
        "python_full_version": f"{python_version}.0",
        "sys_platform": sys_platform,
        "platform_system": {"linux": "Linux", "darwin": "Darwin"}[sys_platform],
        "platform_machine": machine,
        "platform_release": "",
        "platform_version": "",
        "os_name": "posix",
    }
