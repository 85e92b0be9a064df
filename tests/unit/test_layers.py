"""Dependencies point worker → tasks → domain, and the Stripe emulator stands apart: read from
the source's imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FORBIDDEN = {
    "domain": (
        *("tasks", "worker", "stripe_emulator"),
        *("celery", "kombu", "sqlalchemy", "stripe", "fastapi", "redis"),
    ),
    "tasks": ("worker", "stripe_emulator", "sqlalchemy", "stripe", "fastapi", "redis"),
    "stripe_emulator": ("domain", "tasks", "worker"),
}


def imported_modules(path: Path, *, at_import_time_only: bool = False) -> set[str]:
    """Every module a file imports, at its top or inside a function (unless
    ``at_import_time_only``: then only what importing the file itself imports)."""
    modules: set[str] = set()
    pending: list[ast.AST] = [ast.parse(path.read_text(), str(path))]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
        elif at_import_time_only and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        pending.extend(ast.iter_child_nodes(node))
    return modules


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_imports_nothing_from_the_layers_above_it(package: str) -> None:
    offending = sorted(
        f"{path.relative_to(ROOT)} imports {module}"
        for path in (ROOT / package).rglob("*.py")
        for module in imported_modules(path)
        if module.split(".")[0] in FORBIDDEN[package]
    )

    assert offending == []


def test_the_worker_imports_the_stripe_emulator_only_inside_the_functions_that_run_it() -> None:
    # The emulator is a distribution of its own, absent from the production wheel and image:
    # importing a worker module must not need it.
    offending = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "worker").rglob("*.py")
        if any(
            module.split(".")[0] == "stripe_emulator"
            for module in imported_modules(path, at_import_time_only=True)
        )
    )

    assert offending == []
