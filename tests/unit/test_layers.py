"""Dependencies point worker → tasks → domain: read from the source's imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FORBIDDEN = {
    "domain": ("tasks", "worker", "celery", "kombu", "sqlalchemy", "stripe", "fastapi", "redis"),
    "tasks": ("worker", "sqlalchemy", "stripe", "fastapi", "redis"),
}


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at its top or inside a function."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
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
