"""The two commands of the README, runnable on a machine with only Python 3.11+.

    python3 -m worker.dev up      # set up .venv, then run the whole system
    python3 -m worker.dev test    # set up .venv, then lint, type-check and run the tests

Standard library only: this runs before anything is installed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("BILLING_VENV", ROOT / ".venv"))
BIN = VENV / "bin"


def _run(*argv: str | Path) -> None:
    print("+", " ".join(str(a) for a in argv), flush=True)
    completed = subprocess.run([str(a) for a in argv], cwd=ROOT, check=False)
    if completed.returncode != 0:
        raise SystemExit(completed.returncode)


# The Stripe emulator is a distribution of its own, left out of the production wheel and image:
# `up` runs it and the tests drive it, so development installs it beside the project.
EMULATOR = ROOT / "stripe_emulator"


def ensure_environment(extras: str) -> None:
    """Create the virtualenv and install the project and the Stripe emulator, again only when
    either pyproject changed."""
    if not (BIN / "python").exists():
        print(f"creating {VENV}", flush=True)
        venv.create(VENV, with_pip=True)
    digest = hashlib.sha256(
        (ROOT / "pyproject.toml").read_bytes()
        + (EMULATOR / "pyproject.toml").read_bytes()
        + extras.encode()
    ).hexdigest()
    stamp = VENV / f".billing-worker-{extras or 'base'}"
    if not stamp.exists() or stamp.read_text() != digest:
        _run(BIN / "python", "-m", "pip", "install", "--quiet", "--upgrade", "pip")
        target = f".[{extras}]" if extras else "."
        _run(
            *(BIN / "python", "-m", "pip", "install", "--quiet"),
            *("-e", target, "-e", "./stripe_emulator"),
        )
        stamp.write_text(digest)


def main(argv: list[str]) -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - runs under any python3 before the venv exists
        raise SystemExit("billing-worker needs Python 3.11 or newer")
    command, rest = (argv[0], argv[1:]) if argv else ("help", [])
    if command == "up":
        ensure_environment("")
        os.execv(BIN / "billing-worker", [str(BIN / "billing-worker"), "up", *rest])
    elif command == "test":
        ensure_environment("dev")
        _run(BIN / "ruff", "check", ".")
        _run(BIN / "ruff", "format", "--check", ".")
        _run(BIN / "mypy")
        os.execv(BIN / "python", [str(BIN / "python"), "-m", "pytest", *rest])
    else:
        print(__doc__)
        raise SystemExit(0 if command in ("help", "-h", "--help") else 2)


if __name__ == "__main__":
    main(sys.argv[1:])
