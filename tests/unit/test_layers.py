"""Dependencies point worker → tasks → application → domain, and the Stripe emulator stands
apart: read from the source's imports."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FORBIDDEN = {
    "domain": (
        *("application", "tasks", "adapters", "worker", "stripe_emulator"),
        *("celery", "kombu", "sqlalchemy", "stripe", "fastapi", "redis", "opentelemetry"),
    ),
    "application": (
        *("tasks", "adapters", "worker", "stripe_emulator"),
        *("celery", "kombu", "billiard", "sqlalchemy", "stripe", "fastapi", "redis"),
        "opentelemetry",  # spans are made at the adapters and the tasks' boundary
    ),
    "tasks": (
        *("adapters", "worker", "stripe_emulator", "sqlalchemy", "stripe", "fastapi", "redis"),
        "opentelemetry",
    ),
    # The adapters implement the ports beside the layers: what runs the system hands them
    # their values, and no HTTP or command-line framework reaches them.
    "adapters": ("tasks", "worker", "stripe_emulator", "fastapi", "starlette", "click", "uvicorn"),
    "stripe_emulator": ("domain", "application", "tasks", "adapters", "worker"),
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


def layer_violations(root: Path, package: str) -> list[str]:
    """Each import, at the top of a file of ``package`` or inside a function, of a package
    ``FORBIDDEN`` to it, in the tree at ``root``."""
    return sorted(
        f"{path.relative_to(root)} imports {module}"
        for path in (root / package).rglob("*.py")
        for module in imported_modules(path)
        if module.split(".")[0] in FORBIDDEN[package]
    )


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_imports_nothing_from_the_layers_above_it(package: str) -> None:
    assert layer_violations(ROOT, package) == []


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


def test_only_the_modules_of_the_stripe_adapter_import_the_stripe_sdk() -> None:
    # The Stripe adapter is cut into modules by what they ask Stripe (adapters/provider/);
    # everything else reaches Stripe through the provider port.
    offending = sorted(
        str(path.relative_to(ROOT))
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if not path.is_relative_to(ROOT / "adapters" / "provider")
        and any(module.split(".")[0] == "stripe" for module in imported_modules(path))
    )

    assert offending == []


PRODUCT = ("domain", "application", "tasks", "adapters", "worker")

ADAPTERS = ("adapters",)
"""What adapts a technology to the ports (or serves the others): ``adapters/``."""

SETTINGS_MAY_IMPORT = (
    "domain",
    "adapters.urls",
    "worker.settings",
    "pydantic",
    "pydantic_settings",
)
"""The settings are values read from the environment: besides Python's own modules they know
the domain's value types and how a URL is shown, never the local stack (``stack.json`` is read
by ``worker.local.stack_state`` alone) nor an adapter that would read them back."""

ENTRY_POINTS = (
    *("worker.api", "worker.cli", "worker.local", "worker.launch"),
    *("worker.bootstrap", "worker.celery_app", "worker.dev"),
)
"""What runs the system: the composition root, the processes and what starts them."""

OBSERVABILITY_MAY_IMPORT = ("domain", "application.log_context", "adapters.observability")
"""Observability is told everything it records; from below it knows only the domain's
vocabulary and the runner's log context."""


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def product_modules(root: Path = ROOT) -> dict[str, Path]:
    return {
        module_name(path, root): path
        for package in PRODUCT
        for path in (root / package).rglob("*.py")
        if "migrations" not in path.parts
    }


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each product module (of the tree at ``root``) and the product modules it imports (lazily
    or not); ``from a import b`` counts as importing ``a.b`` when that is a module."""
    modules = product_modules(root)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [
                    f"{node.module}.{alias.name}"
                    if f"{node.module}.{alias.name}" in modules
                    else node.module
                    for alias in node.names
                ]
            else:
                continue
            edges.update(target for target in targets if target in modules and target != name)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(f"{prefix}.") for prefix in prefixes)


def test_no_module_of_the_product_imports_itself_back_through_others() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_sees_a_cycle_through_a_lazy_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

    assert cycles(graph) == [["a", "b", "c"]]


def adapters_reaching_the_worker(root: Path = ROOT) -> list[str]:
    """Each import, lazy or not, of ``worker`` by a module of ``adapters/`` (of the tree at
    ``root``): an adapter is handed its values, it never reads the settings itself."""
    return sorted(
        f"{path.relative_to(root)} imports {module}"
        for path in (root / "adapters").rglob("*.py")
        for module in imported_modules(path)
        if within(module, ("worker",))
    )


def test_the_adapters_never_import_what_runs_the_system() -> None:
    assert adapters_reaching_the_worker() == []


def test_the_adapters_rule_sees_a_lazy_import_of_the_composition_root(tmp_path: Path) -> None:
    tree = write_tree(
        tmp_path,
        {
            "adapters/db/engine.py": "from worker.settings import Settings\n",
            "adapters/messaging/broker.py": "def go() -> None:\n    import worker.bootstrap\n",
            "adapters/outbound/stream.py": "from worker.api.app import asgi_app\n",
        },
    )

    assert adapters_reaching_the_worker(tree) == [
        "adapters/db/engine.py imports worker.settings",
        "adapters/messaging/broker.py imports worker.bootstrap",
        "adapters/outbound/stream.py imports worker.api.app",
    ]


def settings_imports(root: Path = ROOT) -> list[str]:
    """Each import, lazy or not, by a module of ``worker/settings/`` of something neither
    ``SETTINGS_MAY_IMPORT`` nor Python's own."""
    return sorted(
        f"{path.relative_to(root)} imports {module}"
        for path in (root / "worker" / "settings").rglob("*.py")
        for module in imported_modules(path)
        if not within(module, SETTINGS_MAY_IMPORT)
        and module.split(".")[0] not in sys.stdlib_module_names
    )


def test_the_settings_never_read_the_local_stack_nor_import_an_adapter_that_reads_them() -> None:
    assert settings_imports() == []


def test_the_settings_rule_sees_the_local_stack_read_lazily(tmp_path: Path) -> None:
    tree = write_tree(
        tmp_path,
        {
            "worker/settings/storage.py": "import json\nfrom pydantic import Field\n",
            "worker/settings/messaging.py": (
                "def stack() -> None:\n    from worker.local.stack_state import read_stack\n"
            ),
            "worker/settings/provider.py": "from adapters.db.engine import get_engine\n",
        },
    )

    assert settings_imports(tree) == [
        "worker/settings/messaging.py imports worker.local.stack_state",
        "worker/settings/provider.py imports adapters.db.engine",
    ]


def test_neither_the_domain_nor_the_use_cases_import_an_adapter() -> None:
    offending = sorted(
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        if within(module, ("domain", "application"))
        for target in targets
        if within(target, ADAPTERS)
    )

    assert offending == []


def test_observability_imports_nothing_of_ours_but_the_domain_and_the_log_context() -> None:
    offending = sorted(
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        if within(module, ("adapters.observability",))
        for target in targets
        if not within(target, OBSERVABILITY_MAY_IMPORT)
    )

    assert offending == []


def test_the_composition_root_never_reaches_up_to_the_processes_it_serves() -> None:
    root_imports = import_graph()["worker.bootstrap"]

    assert sorted(t for t in root_imports if within(t, ENTRY_POINTS)) == []


def test_the_worker_keeps_at_most_ten_modules_at_its_top_level() -> None:
    top_level = sorted(path.name for path in (ROOT / "worker").glob("*.py"))

    assert len(top_level) <= 10, top_level


def test_the_skip_locked_claim_is_written_once() -> None:
    # The most delicate SQL here: a second copy would drift from the first.
    writers = sorted(
        str(path.relative_to(ROOT))
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if "with_for_update(skip_locked=True)" in path.read_text()
    )

    # db/command_log.py's is the retention sweep's DELETE, not a claim.
    assert writers == ["adapters/db/claims.py", "adapters/db/command_log.py"]


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    pending = [start]
    while pending:
        module = pending.pop()
        if module not in seen:
            seen.add(module)
            pending.extend(graph.get(module, ()))
    return seen


@pytest.mark.parametrize("process", ["worker.api.app", "worker.cli"])
def test_a_process_that_only_publishes_never_builds_the_workers_celery_app(process: str) -> None:
    # One Celery app per process: the API and the CLI publish through the root's
    # publishing app, never through (a second copy of) the workers' app.
    assert "worker.celery_app" not in reachable(import_graph(), process)


API_FORBIDDEN = ("sqlalchemy", "adapters.db")
"""The API reaches the database through the ports the composition root hands it (the command
log's, the client verifier's, the services' readiness): never around them."""


def api_imports_around_the_ports(root: Path) -> list[str]:
    """Each import of ``API_FORBIDDEN`` by a module under ``root`` (the API), lazy or not."""
    return sorted(
        f"{path.relative_to(root.parent.parent)} imports {module}"
        for path in root.rglob("*.py")
        for module in imported_modules(path)
        if within(module, API_FORBIDDEN)
    )


def test_the_api_imports_no_sqlalchemy_and_nothing_of_the_database_adapter() -> None:
    assert api_imports_around_the_ports(ROOT / "worker" / "api") == []


def test_the_api_rule_sees_a_lazy_import_of_the_database_adapter(tmp_path: Path) -> None:
    api = tmp_path / "worker" / "api"
    api.mkdir(parents=True)
    (api / "health.py").write_text(
        "def ready() -> None:\n    from adapters.db.engine import get_engine\n"
    )
    (api / "gateway.py").write_text("from sqlalchemy.exc import IntegrityError\n")

    assert api_imports_around_the_ports(api) == [
        "worker/api/gateway.py imports sqlalchemy.exc",
        "worker/api/health.py imports adapters.db.engine",
    ]


TASKS_APP_GLUE = {"worker/celery_app.py": "tasks.runtime"}
"""The one module of ``worker/`` that builds on ``tasks/`` beyond task names: the workers'
Celery app."""


def use_cases_taken_from_tasks(root: Path) -> list[str]:
    """What the modules under ``root`` import from ``tasks/`` other than task names (upper
    case constants) and the app glue: use cases belong to ``application/``, and
    ``tasks.handlers`` is no more."""
    offending: list[str] = []
    for path in root.rglob("*.py"):
        name = str(path.relative_to(root.parent))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                offending += [
                    f"{name} imports {alias.name}"
                    for alias in node.names
                    if within(alias.name, ("tasks",))
                ]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if not within(node.module, ("tasks",)):
                    continue
                if TASKS_APP_GLUE.get(name) == node.module:
                    continue
                offending += [
                    f"{name} imports {node.module}.{alias.name}"
                    for alias in node.names
                    if within(node.module, ("tasks.handlers",)) or not alias.name.isupper()
                ]
    return sorted(offending)


def test_the_worker_takes_only_task_names_from_tasks_and_its_use_cases_from_application() -> None:
    assert use_cases_taken_from_tasks(ROOT / "worker") == []


def test_the_tasks_rule_sees_a_use_case_taken_from_tasks(tmp_path: Path) -> None:
    worker = tmp_path / "worker"
    (worker / "cli").mkdir(parents=True)
    (worker / "cli" / "users.py").write_text(
        "from tasks.users import ENABLE_USER\n"
        "def enable() -> None:\n    from tasks.handlers.users import enable_user\n"
    )
    (worker / "seed.py").write_text("from tasks.base import run_command\nimport tasks.users\n")

    assert use_cases_taken_from_tasks(worker) == [
        "worker/cli/users.py imports tasks.handlers.users.enable_user",
        "worker/seed.py imports tasks.base.run_command",
        "worker/seed.py imports tasks.users",
    ]


# The house's rules of issue 31, and proof that the checks fail when a rule is broken.

TASKS_MAY_IMPORT = ("domain", "application", "tasks", "celery", "kombu", "billiard", "pydantic")
"""``tasks/`` holds Celery only: thin tasks, the runner and the glue to the app. Besides Python's
own modules, it reaches the work (``application/``, ``domain/``) and Celery, never an adapter."""

SERVING_WINGS = ("worker.api", "worker.cli", "worker.local")
"""What serves a caller (the API, the command line, the local stack's demo data) calls the use
cases in ``application/``, never ``tasks/``: a task is Celery's entry point, not a use case."""


def foreign_imports(root: Path, package: str, allowed: tuple[str, ...]) -> list[str]:
    """Each import in ``package`` (of the tree at ``root``, lazy ones too) of a package neither
    ``allowed`` nor Python's own."""
    return sorted(
        f"{path.relative_to(root)} imports {module}"
        for path in (root / package).rglob("*.py")
        for module in imported_modules(path)
        if module.split(".")[0] not in (*allowed, *sys.stdlib_module_names)
    )


def tasks_importers(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        if within(module, SERVING_WINGS)
        for target in targets
        if within(target, ("tasks",))
    )


def test_tasks_import_celery_the_application_and_the_domain_and_no_adapter() -> None:
    assert foreign_imports(ROOT, "tasks", TASKS_MAY_IMPORT) == []


def test_the_api_the_cli_and_the_local_stack_call_use_cases_never_tasks() -> None:
    assert tasks_importers(import_graph()) == []


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root


def test_the_layer_check_reports_a_use_case_that_imports_celery_or_an_adapter(
    tmp_path: Path,
) -> None:
    tree = write_tree(
        tmp_path,
        {
            "application/__init__.py": "",
            "application/handlers/enable.py": "import celery\n",
            "application/handlers/store.py": (
                "def save() -> None:\n    from adapters.db import uow\n"
            ),
            "application/retry.py": "import random\n\nfrom domain.errors import TransientError\n",
        },
    )

    assert layer_violations(tree, "application") == [
        "application/handlers/enable.py imports celery",
        "application/handlers/store.py imports adapters.db",
    ]


def test_the_tasks_check_reports_a_task_that_reaches_an_adapter(tmp_path: Path) -> None:
    tree = write_tree(
        tmp_path,
        {
            "tasks/users.py": "from celery import shared_task\n\nfrom application import retry\n",
            "tasks/billing.py": "def run() -> None:\n    import httpx\n",
            "tasks/events.py": "from adapters.outbound.stream import publish\n",
        },
    )

    assert foreign_imports(tree, "tasks", TASKS_MAY_IMPORT) == [
        "tasks/billing.py imports httpx",
        "tasks/events.py imports adapters.outbound.stream",
    ]


def test_the_import_graph_of_a_tree_shows_a_cycle_and_a_wing_calling_a_task(
    tmp_path: Path,
) -> None:
    tree = write_tree(
        tmp_path,
        {
            "domain/__init__.py": "",
            "domain/billing.py": "from domain.rules import checked_id\n",
            "domain/rules.py": "def checked_id() -> None:\n    from domain import billing\n",
            "tasks/__init__.py": "",
            "tasks/users.py": "from domain import rules\n",
            "worker/cli/users.py": "from tasks.users import enable\n",
        },
    )
    graph = import_graph(tree)

    assert cycles(graph) == [["domain.billing", "domain.rules"]]
    assert tasks_importers(graph) == ["worker.cli.users imports tasks.users"]


def test_every_package_says_in_its_init_what_it_holds() -> None:
    silent = sorted(
        str(path.relative_to(ROOT))
        for package in PRODUCT
        for path in (ROOT / package).rglob("__init__.py")
        if "migrations" not in path.parts and not ast.get_docstring(ast.parse(path.read_text()))
    )

    assert silent == []
