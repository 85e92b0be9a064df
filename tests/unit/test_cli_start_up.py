"""What ``billing-worker`` loads before it runs a command: showing the help needs no use case
and no adapter (the rule is in :mod:`worker.cli`'s docstring), so that it stays quick. Every
command group loads when the CLI starts, so the root's help and one command's stand for all.
Each case runs the real command in a Python process of its own and reads the modules that
process loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.environment import settings_environment

OURS = ("domain", "application", "tasks", "adapters", "worker")

SHOWING_HELP_NEEDS = frozenset(
    {
        *("click", "pydantic", "pydantic_core", "pydantic_settings", "dotenv"),
        *("annotated_types", "typing_extensions", "typing_inspection"),
    }
)
"""The packages not ours and not Python's own that the help may load: click draws it, the
settings (pydantic) name the environment it reads."""

RUNNING_A_COMMAND_NEEDS = ("application.handlers", "worker.bootstrap", "tasks")
"""Ours, loaded only by a command that runs: the use cases (they build most of the domain's
message models), the composition root and its adapters, the Celery tasks."""

RECORD_MODULES = """
import atexit, pathlib, sys
record = pathlib.Path(sys.argv.pop(1))
atexit.register(lambda: record.write_text("\\n".join(sorted(sys.modules))))
from worker.cli import main
main()
"""


def modules_loaded_by(tmp_path: Path, *args: str) -> set[str]:
    record = tmp_path / "modules.txt"
    completed = subprocess.run(
        [sys.executable, "-c", RECORD_MODULES, str(record), *args],
        env=settings_environment({"BILLING_DATA_DIR": str(tmp_path)}),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return set(record.read_text().split())


def others_packages(modules: set[str]) -> set[str]:
    """The top-level packages of ``modules`` neither ours nor Python's (nor its import hooks:
    the editable installs' finders, setuptools' ``_distutils_hack``)."""
    return {
        top
        for top in (module.split(".")[0] for module in modules)
        if top not in OURS and top not in sys.stdlib_module_names and not top.startswith("_")
    }


def within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(f"{prefix}.") for prefix in prefixes)


@pytest.mark.parametrize("args", [("--help",), ("users", "create", "--help")], ids=" ".join)
def test_a_help_page_loads_no_use_case_and_no_adapter(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    loaded = modules_loaded_by(tmp_path, *args)

    assert others_packages(loaded) - SHOWING_HELP_NEEDS == set()
    assert sorted(m for m in loaded if within(m, RUNNING_A_COMMAND_NEEDS)) == []


def test_the_check_sees_a_command_that_loads_a_use_case_and_an_adapter() -> None:
    # What a verb imports when it runs, as its help would load it if the import moved to the
    # top of its module.
    loaded = {"click", "application.handlers.users", "sqlalchemy.orm", "worker.bootstrap"}

    assert others_packages(loaded) - SHOWING_HELP_NEEDS == {"sqlalchemy"}
    assert sorted(m for m in loaded if within(m, RUNNING_A_COMMAND_NEEDS)) == [
        "application.handlers.users",
        "worker.bootstrap",
    ]
