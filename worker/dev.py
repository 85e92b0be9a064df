"""The two commands of the README, runnable on a machine with only Python 3.11+.

    python3 -m worker.dev up      # set up .venv, then run the whole system
    python3 -m worker.dev test    # set up .venv, then lint, type-check and run the tests
                                  # (`test --quick`: the unit tests only, in about a minute)
    python3 -m worker.dev lock    # refresh requirements/*.lock from pyproject.toml
                                  # (extra arguments go to `uv pip compile`, e.g. --upgrade)
    python3 -m worker.dev docs    # regenerate the reference pages, then serve the docs
                                  # (`docs --generate`: regenerate only; other arguments go
                                  # to `mkdocs serve`, e.g. --dev-addr 127.0.0.1:8001)
    python3 -m worker.dev bench [name ...] [--quick] [--json PATH]
                                  # set up .venv, then run the benchmarks (all without
                                  # names; --list names them): tests/benchmarks/run.py
    python3 -m worker.dev seed [--database postgresql|sqlite|both] [--commands N]
                                  # a production-sized database for `bench scale` (a year:
                                  # 10,000,000 commands; SQLite a tenth), in .benchmarks/
                                  # scale: tests/benchmarks/scale/seed.py
    python3 -m worker.dev mutants [--module NAME ...]
                                  # the money core's mutation score (mutmut; its modules
                                  # and tests: pyproject.toml): tests/support/mutation_score.py
    python3 -m worker.dev chaos [--seed S] [--schedules N] [--database sqlite|postgresql]
                                [--faults kind,kind] [--list-faults]
                                  # seeded fault schedules over the real stack, judged by
                                  # the independent checker: tests/schedules/run.py
    python3 -m worker.dev screenshots [DIR]
                                  # take the console's screenshots again (docs/images/
                                  # console/): a throwaway `up`, Debian's chromium

`up --help` and `test --help` print their help at once: nothing installed, nothing run.

The virtualenv gets exactly the versions pinned in a lock file (hashes checked), then our own
packages, editable and without dependencies. Standard library only: this runs before anything
is installed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("BILLING_VENV", ROOT / ".venv"))
BIN = VENV / "bin"
LOCK_DIR = ROOT / "requirements"
# Limits on indirect dependencies that every lock obeys (why each one: in the file).
LOCK_CONSTRAINTS = LOCK_DIR / "constraints.txt"

# Our own packages, installed editable after the lock. Each one's pyproject.toml is also a
# source of the lock files. The Stripe emulator is a distribution of its own, left out of the
# production wheel and image: `up` runs it and the tests drive it, so development installs it.
LOCAL_PACKAGES: tuple[str, ...] = (".", "stripe_emulator")
# The oldest Python we support: `uv pip compile --universal` resolves from it upwards, with
# markers for every platform and Python version, so one lock serves every machine.
LOCK_PYTHON = "3.11"
LOCK_TOOL = "uv>=0.13,<1"


@dataclass(frozen=True)
class Lock:
    """One locked set of third-party packages: the ``extras`` of the local packages."""

    name: str
    extras: tuple[str, ...]

    @property
    def path(self) -> Path:
        return LOCK_DIR / f"{self.name}.lock"


DEV_LOCK = Lock("dev", extras=("dev",))  # what `test` installs: runtime + test + lint tools
RUNTIME_LOCK = Lock("runtime", extras=())  # what `up` installs
# Compiled in this order: the runtime lock is constrained to the dev lock's pins, so both
# agree on every package they share and one virtualenv can hold either.
LOCKS = (DEV_LOCK, RUNTIME_LOCK)


def _say(message: str) -> None:
    print(f"==> {message}", flush=True)


def _run(*argv: str | Path) -> None:
    print("+", " ".join(str(a) for a in argv), flush=True)
    completed = subprocess.run([str(a) for a in argv], cwd=ROOT, check=False)
    if completed.returncode != 0:
        raise SystemExit(completed.returncode)


def _pyprojects() -> list[Path]:
    return [(ROOT / package / "pyproject.toml").resolve() for package in LOCAL_PACKAGES]


def _installed_digest(lock: Lock) -> str:
    digest = hashlib.sha256(lock.path.read_bytes())
    for pyproject in _pyprojects():
        digest.update(pyproject.read_bytes())
    return digest.hexdigest()


def _locked_package_count(lock: Lock) -> int:
    lines = lock.path.read_text().splitlines()
    return sum(1 for line in lines if line[:1].isalnum())


def ensure_environment(lock: Lock) -> None:
    """Create the virtualenv and install ``lock``; again only when the lock or a pyproject
    changed. Says what it does at each step, and how long the whole install took."""
    stamp = VENV / f".billing-worker-{lock.name}"
    digest = _installed_digest(lock)
    if stamp.exists() and stamp.read_text() == digest:
        return
    started = time.monotonic()
    if not (BIN / "python").exists():
        _say(f"creating the virtualenv {VENV}")
        venv.create(VENV, with_pip=True)
    _say("upgrading pip")
    _run(BIN / "python", "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    relative_lock = lock.path.relative_to(ROOT)
    _say(f"installing {_locked_package_count(lock)} locked packages from {relative_lock}")
    _run(BIN / "python", "-m", "pip", "install", "--require-hashes", "-r", lock.path)
    for package in LOCAL_PACKAGES:
        _say(f"installing {package} (editable, its dependencies are in the lock)")
        _run(BIN / "python", "-m", "pip", "install", "--quiet", "--no-deps", "-e", package)
    stamp.write_text(digest)
    _say(f"installed in {time.monotonic() - started:.0f} s")


def refresh_locks(uv_arguments: list[str]) -> None:
    """Resolve every lock again from the pyprojects, for every platform and Python 3.11+,
    with the hashes of every file. Pins already in a lock are kept unless ``uv_arguments``
    say otherwise (``--upgrade``, ``--upgrade-package NAME``)."""
    if not (BIN / "python").exists():
        _say(f"creating the virtualenv {VENV}")
        venv.create(VENV, with_pip=True)
    if not (BIN / "uv").exists():
        _say(f"installing {LOCK_TOOL} into the virtualenv")
        _run(BIN / "python", "-m", "pip", "install", "--quiet", LOCK_TOOL)
    LOCK_DIR.mkdir(exist_ok=True)
    sources = [str(path.relative_to(ROOT)) for path in _pyprojects()]
    for lock in LOCKS:
        _say(f"locking {lock.path.relative_to(ROOT)}")
        constraints = ["--constraint", str(LOCK_CONSTRAINTS.relative_to(ROOT))]
        if lock is not DEV_LOCK:
            constraints += ["--constraint", str(DEV_LOCK.path.relative_to(ROOT))]
        extras = [argument for extra in lock.extras for argument in ("--extra", extra)]
        _run(
            BIN / "uv",
            "pip",
            "compile",
            *sources,
            *extras,
            *constraints,
            "--universal",
            "--python-version",
            LOCK_PYTHON,
            "--generate-hashes",
            "--quiet",
            "--custom-compile-command",
            "python3 -m worker.dev lock",
            "--output-file",
            lock.path.relative_to(ROOT),
            *uv_arguments,
        )


TEST_HELP = """usage: python3 -m worker.dev test [--quick] [PYTEST ARGUMENTS ...]

Set up .venv from requirements/dev.lock (only when it or a pyproject changed), then run
`ruff check .`, `ruff format --check .` and `mypy`, then the tests: `pytest -n 2 --dist
loadgroup ARGUMENTS` (two processes; `-n 0` runs one). Every argument goes to pytest, e.g.
`test tests/unit -k money -x`. Once .venv exists, `.venv/bin/python -m pytest --help` lists
pytest's options.

--quick   the quick tier, for the loop of editing: the same lint and type checks, then only
          the tests that start no server and no stack (`tests/unit`: the domain, the use
          cases on the fakes of the ports, the layer rules, the documents): about a minute on
          2 cores. The full suite, as CI runs it, is the command without --quick."""

QUICK_TIER = ("tests/unit",)
"""The tests ``test --quick`` runs: in-process, no server and no stack."""


def _asks_for_help(arguments: list[str]) -> bool:
    return any(argument in ("-h", "--help") for argument in arguments)


def _help_without_installing(command: str) -> None:
    """``up --help`` and ``test --help``: the help at once, nothing installed, nothing run."""
    if command == "test":
        print(TEST_HELP)
        raise SystemExit(0)
    if (BIN / "billing-worker").exists():  # installed before: its own, complete help
        os.execv(BIN / "billing-worker", [str(BIN / "billing-worker"), "up", "--help"])
    print(__doc__)
    print(
        "`up` sets up .venv (about a minute, the first time), then runs `billing-worker up`;\n"
        "its options (--api-port, --flower-port, --fresh, --data-dir…) are listed by\n"
        "`python3 -m worker.dev up --help` once .venv exists, and in docs/reference/cli.md."
    )
    raise SystemExit(0)


def main(argv: list[str]) -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - runs under any python3 before the venv exists
        raise SystemExit("billing-worker needs Python 3.11 or newer")
    command, rest = (argv[0], argv[1:]) if argv else ("help", [])
    if command in ("up", "test") and _asks_for_help(rest):
        _help_without_installing(command)
    if command == "up":
        ensure_environment(RUNTIME_LOCK)
        os.execv(BIN / "billing-worker", [str(BIN / "billing-worker"), "up", *rest])
    elif command == "test":
        quick = "--quick" in rest
        rest = [argument for argument in rest if argument != "--quick"]
        if quick and not any(Path(argument.split("::")[0]).exists() for argument in rest):
            rest = [*QUICK_TIER, *rest]
        ensure_environment(DEV_LOCK)
        _run(BIN / "ruff", "check", ".")
        _run(BIN / "ruff", "format", "--check", ".")
        _run(BIN / "mypy")
        # The suite mostly waits on processes and sockets: two pytest processes, each with
        # its own Redis, PostgreSQL and port range; a backend's tests stay in one process, a
        # file's others together (tests/conftest.py's scheduler). `-n 0` given: one process.
        parallel = (
            []
            if any(arg.startswith(("-n", "--numprocesses")) for arg in rest)
            else [
                "-n",
                "2",
                "--dist",
                "loadgroup",
            ]
        )
        os.execv(BIN / "python", [str(BIN / "python"), "-m", "pytest", *parallel, *rest])
    elif command == "bench":
        ensure_environment(DEV_LOCK)
        os.chdir(ROOT)
        os.execv(BIN / "python", [str(BIN / "python"), "-m", "tests.benchmarks.run", *rest])
    elif command == "seed":
        # A production-sized database for `bench scale` (tests/benchmarks/scale/seed.py).
        ensure_environment(DEV_LOCK)
        os.chdir(ROOT)
        argv = [str(BIN / "python"), "-m", "tests.benchmarks.scale.seed", *rest]
        os.execv(BIN / "python", argv)
    elif command == "mutants":
        ensure_environment(DEV_LOCK)
        os.chdir(ROOT)
        argv = [str(BIN / "python"), "-m", "tests.support.mutation_score", *rest]
        os.execv(BIN / "python", argv)
    elif command == "chaos":
        ensure_environment(DEV_LOCK)
        os.chdir(ROOT)
        os.execv(BIN / "python", [str(BIN / "python"), "-m", "tests.schedules.run", *rest])
    elif command == "screenshots":
        # The console's pictures in docs/images/console/: a throwaway `up`, Debian's chromium.
        ensure_environment(DEV_LOCK)
        os.chdir(ROOT)
        argv = [str(BIN / "python"), "-m", "tests.support.console_screenshots", *rest]
        os.execv(BIN / "python", argv)
    elif command == "lock":
        refresh_locks(rest)
    elif command == "docs":
        ensure_environment(DEV_LOCK)
        # The settings and CLI pages are generated from the source (worker/cli/reference_docs.py).
        _run(BIN / "python", "-m", "worker.cli.reference_docs")
        if rest[:1] == ["--generate"]:
            return
        os.execv(BIN / "mkdocs", [str(BIN / "mkdocs"), "serve", *rest])
    else:
        print(__doc__)
        raise SystemExit(0 if command in ("help", "-h", "--help") else 2)


if __name__ == "__main__":
    main(sys.argv[1:])
