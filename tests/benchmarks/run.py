"""Run the benchmarks: each prints a table of our figures beside their baselines, measured in
the same run, and the run writes every result as JSON.

    python3 -m worker.dev bench [name ...] [--quick] [--json PATH]
    python -m tests.benchmarks.run [name ...] [--quick] [--json PATH]   # inside the venv

Without names, every benchmark runs (``--list`` names them). ``--quick`` uses tiny sizes: a
smoke run that proves the command works; its figures mean little. The JSON goes to ``PATH``,
by default ``.benchmarks/results-<UTC time>.json``. Benchmarks are not tests: they never run
in CI, except the smoke run of ``tests/e2e/test_benchmarks_smoke.py``.

The scripts that came before this command (``bench_*.py``) are registered too: run here,
their own report is printed and kept in the JSON (``report``), without figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.benchmarks import failover, http_paths, queue_throughput, stripe_bound, sweep_and_memory
from tests.benchmarks.figures import Figure, table
from tests.benchmarks.harness import ROOT, BenchContext
from tests.benchmarks.scale import bench as scale

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Measured:
    """A benchmark of this command: a function of the run's context giving figures."""

    title: str
    measure: Callable[[BenchContext], list[Figure]]


@dataclass(frozen=True)
class Script:
    """A ``bench_*.py`` script of its own, run with ``arguments`` (full size) or with
    ``quick`` flags."""

    script: str
    quick: tuple[str, ...] = ()
    arguments: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        docstring = (Path(__file__).parent / self.script).read_text().split('"""')[1]
        return docstring.strip().splitlines()[0]


Benchmark = Measured | Script

REGISTRY: dict[str, Benchmark] = {
    "p1": Measured("P1: commands on the queue ÷ bare Celery", queue_throughput.p1),
    "p2": Measured("P2: respond-async accepts ÷ raw publishes", http_paths.p2),
    "api-processes": Measured(
        "API processes: respond-async accepts with 1 and 2 API processes ÷ raw publishes",
        http_paths.api_processes,
    ),
    "p3": Measured("P3: synchronous HTTP round trip minus raw Celery's", http_paths.p3),
    "p4": Measured("P4: account creations with 300 ms of Stripe latency", stripe_bound.p4),
    "p5": Measured("P5: the period-end burst", stripe_bound.p5),
    "p5l": Measured(
        "P5L: the period-end burst at Stripe's live 100 writes/s ÷ the same on 85166c7, "
        "and ÷ the floor's pace",
        stripe_bound.p5l,
    ),
    "p6": Measured("P6: beat's due-changes sweep over a million changes", sweep_and_memory.p6),
    "p7": Measured("P7: memory (PSS) of each process", sweep_and_memory.p7),
    "p8": Measured("P8: what each capability costs per command", queue_throughput.p8),
    "scaling": Measured("Scaling: worker processes and nodes", queue_throughput.scaling),
    "tracing": Measured("Tracing: what it costs per command, on ÷ off", queue_throughput.tracing),
    "scale": Measured(
        "Scale: every path on a year's database (10,000,000 commands) ÷ on day one",
        scale.scale,
    ),
    "scale-reads": Measured(
        "Scale, its sweeps and reads alone: beat's sweeps, `accounts show`, bytes a command",
        scale.scale_reads,
    ),
    "scale-reconcile": Measured(
        "Scale, its Stripe passes alone: a full reconciliation pass and the drift report over"
        " the year's subscriptions at Stripe's live read rate ÷ the floor",
        scale.scale_reconcile,
    ),
    "failover": Measured(
        "Failover: time to resume after Redis's primary is killed", failover.failover
    ),
    "events": Script("bench_events.py", ("--users", "20", "--clients", "4", "--wait", "20")),
    "billing-accounts": Script("bench_billing_accounts.py", ("--accounts", "20", "--clients", "4")),
    "auth-flood": Script("bench_auth_flood.py", ("--seconds", "2")),
    "made-up-flood": Script("bench_made_up_flood.py", ("--seconds", "3")),
    "stripe-emulator": Script("bench_stripe_emulator.py", ("--requests", "100")),
    "stripe-events-in": Script(
        "bench_stripe_events_in.py",
        ("--events", "50", "--subscriptions", "10", "--sweep-seconds", "3"),
    ),
    "webhook-retries": Script("bench_webhook_retries.py", ("--runs", "200")),
    # Fair shares (docs/explanation/fair-share.md): a period end of 300 changes at test mode's
    # 25 calls a second, without then with what competes with it (target: 1.10 times at most).
    "storm": Script(
        "bench_period_end_burst.py",
        ("--sizes", "20", "--rates", "25", "--late", "--stripe-events"),
        arguments=("--sizes", "300", "--rates", "25", "--late", "--stripe-events"),
    ),
    "preview-flood": Script(
        "bench_period_end_burst.py",
        ("--sizes", "20", "--rates", "25", "--late", "--preview-flood"),
        arguments=("--sizes", "300", "--rates", "25", "--late", "--preview-flood"),
    ),
}


def machine() -> dict[str, Any]:
    """What the figures were measured on (a shared machine shows in its load)."""
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in _read("/proc/cpuinfo").splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown",
    )
    memory = next(
        (line.split()[1] for line in _read("/proc/meminfo").splitlines() if "MemTotal" in line),
        None,
    )
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "memory_mib": int(memory) // 1024 if memory else None,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "load_average_at_start": list(os.getloadavg()),
    }


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def revision() -> dict[str, Any]:
    def git(*args: str) -> str:
        completed = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
        )
        return completed.stdout.strip()

    return {"commit": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain"))}


def run_measured(ctx: BenchContext, benchmark: Measured) -> dict[str, Any]:
    figures = benchmark.measure(ctx)
    print(table(benchmark.title, figures), flush=True)
    return {"kind": "figures", "figures": [figure.to_json() for figure in figures]}


def run_script(quick: bool, benchmark: Script) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).parent / benchmark.script)]
    argv += list(benchmark.quick) if quick else list(benchmark.arguments)
    print(f"### {benchmark.title}\n\n+ {' '.join(argv[1:])}", flush=True)
    process = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        print(line, end="", flush=True)
        lines.append(line)
    returncode = process.wait()
    if returncode != 0:
        raise RuntimeError(f"{benchmark.script} exited with {returncode}")
    return {"kind": "script", "argv": argv[1:], "report": "".join(lines), "figures": []}


def run(names: Sequence[str], quick: bool) -> dict[str, Any]:
    """Run ``names`` in order; a benchmark that fails is recorded with its error and the
    others still run."""
    results: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "command": "python3 -m worker.dev bench " + " ".join([*names, *(["--quick"] * quick)]),
        "machine": machine(),
        **revision(),
        "benchmarks": {},
    }
    with BenchContext.open(quick) as ctx:
        for name in names:
            benchmark = REGISTRY[name]
            print(f"\n==> {name}: {benchmark.title}", flush=True)
            started = time.monotonic()
            outcome: dict[str, Any]
            try:
                if isinstance(benchmark, Measured):
                    outcome = run_measured(ctx, benchmark)
                else:
                    outcome = run_script(quick, benchmark)
                outcome["error"] = None
            except Exception as error:
                traceback.print_exc()
                outcome = {
                    "kind": "error",
                    "figures": [],
                    "error": f"{type(error).__name__}: {error}",
                }
            outcome["title"] = benchmark.title
            outcome["seconds"] = round(time.monotonic() - started, 1)
            results["benchmarks"][name] = outcome
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m worker.dev bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("names", nargs="*", metavar="name", help="benchmarks to run (all)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--json", type=Path, metavar="PATH", help="where to write the results")
    parser.add_argument("--list", action="store_true", help="name every benchmark and stop")
    args = parser.parse_args(argv)
    if args.list:
        for name, benchmark in REGISTRY.items():
            print(f"{name:<18} {benchmark.title}")
        return 0
    unknown = [name for name in args.names if name not in REGISTRY]
    if unknown:
        print(
            f"unknown benchmark {', '.join(unknown)}; one of: {', '.join(REGISTRY)}",
            file=sys.stderr,
        )
        return 2
    names = list(dict.fromkeys(args.names)) or list(REGISTRY)
    results = run(names, args.quick)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path: Path = args.json or ROOT / ".benchmarks" / f"results-{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str, allow_nan=False) + "\n")
    failed = [name for name, outcome in results["benchmarks"].items() if outcome["error"]]
    print(f"\nresults: {path}" + (f"\nfailed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
