"""The money core's mutation score: ``python3 -m worker.dev mutants [--module NAME ...]``.

Runs mutmut (configured in ``pyproject.toml``'s ``[tool.mutmut]``: the modules it mutates and
the tests that must kill each mutant), then prints each module's score, the mutants that
survived, and fails when a module kills fewer than :data:`TARGET` of its mutants. A mutant
no test reaches counts as survived: a line nothing runs is a line nothing checks.

mutmut keeps its state in ``mutants/``: a second run tests only what changed since.
``--module`` limits the report (not the run) to the modules named.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MUTMUT = Path(sys.executable).with_name("mutmut")
TARGET = 0.85
"""The share of its mutants each module of the money core must kill."""
KILLED = frozenset({"killed", "timeout", "caught by type check"})
"""mutmut's verdicts that mean a test (or the type checker) noticed the mutant."""
SKIPPED = frozenset({"not checked"})
"""Verdicts of mutants mutmut did not run (an interrupted run): counted nowhere."""


@dataclass
class ModuleScore:
    """One module's mutants by verdict, and the names of those that survived."""

    module: str
    verdicts: Counter[str] = field(default_factory=Counter)
    survivors: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(n for verdict, n in self.verdicts.items() if verdict not in SKIPPED)

    @property
    def killed(self) -> int:
        return sum(n for verdict, n in self.verdicts.items() if verdict in KILLED)

    @property
    def score(self) -> float:
        return self.killed / self.total if self.total else 1.0


_MODULE_OF_MUTANT = re.compile(r"\.x[_ǁ]")


def scores(results: str) -> list[ModuleScore]:
    """Each module's score from ``mutmut results --all true``'s lines (``name: verdict``)."""
    by_module: dict[str, ModuleScore] = defaultdict(lambda: ModuleScore(""))
    for line in results.splitlines():
        name, separator, verdict = line.strip().rpartition(": ")
        if not separator:
            continue
        module = _MODULE_OF_MUTANT.split(name, maxsplit=1)[0]
        score = by_module[module]
        score.module = module
        score.verdicts[verdict] += 1
        if verdict not in KILLED | SKIPPED:
            score.survivors.append(f"{name} ({verdict})")
    return sorted(by_module.values(), key=lambda score: score.module)


def report(module_scores: list[ModuleScore]) -> str:
    lines = [f"{'module':46} {'killed':>7} {'of':>5} {'score':>6}"]
    for score in module_scores:
        mark = "" if score.score >= TARGET else f"   below {TARGET:.0%}"
        lines.append(
            f"{score.module:46} {score.killed:>7} {score.total:>5} {score.score:>6.1%}{mark}"
        )
    survivors = [name for score in module_scores for name in score.survivors]
    if survivors:
        lines += ["", "survived (`.venv/bin/mutmut show NAME` shows one):"]
        lines += [f"  {name}" for name in survivors]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m worker.dev mutants")
    parser.add_argument("--module", action="append", default=[], help="report only these")
    parser.add_argument("--max-children", type=int, default=2, help="mutants run at once")
    arguments = parser.parse_args(argv)
    subprocess.run(
        [str(MUTMUT), "run", "--max-children", str(arguments.max_children)],
        cwd=ROOT,
        check=True,
    )
    results = subprocess.run(
        [str(MUTMUT), "results", "--all", "true"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    module_scores = [
        score
        for score in scores(results)
        if not arguments.module or score.module in arguments.module
    ]
    print(report(module_scores))
    return 0 if all(score.score >= TARGET for score in module_scores) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
