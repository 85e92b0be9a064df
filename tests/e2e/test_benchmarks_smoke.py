"""The benchmark command runs and writes well-formed results (a smoke run: tiny sizes, no
figure is judged; benchmarks themselves never run in CI)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks.run import REGISTRY

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ("p2", "p7")
"""The cheapest benchmarks that still start every kind of process: the API, a worker node,
beat and the bare Celery worker of the baselines."""
FIGURE_FIELDS = {
    "id",
    "label",
    "value",
    "unit",
    "baseline",
    "baseline_label",
    "ratio",
    "difference",
    "target",
    "met",
    "details",
}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("bench") / "results.json"
    completed = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.run", "--quick", *SMOKE, "--json", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


@pytest.mark.timeout(180)
def test_a_quick_run_records_the_machine_the_commit_and_every_benchmark_asked_for(
    results: dict[str, Any],
) -> None:
    assert results["quick"] is True
    assert {"cpu_count", "cpu_model", "python"} <= results["machine"].keys()
    assert len(results["commit"]) == 40
    assert isinstance(results["dirty"], bool)
    assert results["date"]
    assert list(results["benchmarks"]) == list(SMOKE)
    for name, outcome in results["benchmarks"].items():
        assert outcome["error"] is None, name
        assert outcome["title"] == REGISTRY[name].title


@pytest.mark.timeout(180)
def test_every_figure_of_a_quick_run_stands_beside_its_baseline(
    results: dict[str, Any],
) -> None:
    figures = [f for outcome in results["benchmarks"].values() for f in outcome["figures"]]
    ids = {figure["id"] for figure in figures}
    assert "p2" in ids
    assert {"p7.worker.main", "p7.worker.child1", "p7.worker.child2", "p7.api", "p7.beat"} <= ids
    for figure in figures:
        assert set(figure) == FIGURE_FIELDS, figure["id"]
        assert isinstance(figure["value"], float), figure["id"]
        assert isinstance(figure["baseline"], float), figure["id"]
        assert figure["unit"], figure["id"]
        if figure["target"] is not None:
            assert figure["met"] in (True, False), figure["id"]
