"""The Grafana dashboard (``deploy/grafana/billing-worker.json``) queries metrics the system
exports, in PromQL that Prometheus accepts (each query checked by promtool as a recording
rule), and shows every part operators watch."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import Counter, Gauge, Histogram

from adapters.observability import metrics
from tests.support.promtool import run_promtool

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "billing-worker.json"

BEAT_GAUGES = {
    "billing_queue_depth",
    "billing_scheduled_changes",
    "billing_oldest_due_change_age_seconds",
    "billing_failed_commands",
    "billing_stripe_budget_rate",
    "billing_stripe_budget_configured_rate",
    "billing_stripe_budget_waiting",
    "billing_stripe_budget_backlog_seconds",
    "billing_collector_up",
    "billing_webhook_deliveries",
    "billing_webhook_endpoints",
    "billing_events_unpublished",
    "billing_pending_accounts",
    "billing_oldest_pending_account_age_seconds",
    "billing_loop_silence_seconds",
    "billing_loop_silence_limit_seconds",
}


def exported() -> set[str]:
    """Every sample name the processes expose: counters with ``_total``, histograms with
    their buckets, count and sum; the processes' and beat's gauges; Prometheus's own ``up``."""
    names = set(BEAT_GAUGES) | {"up"}
    for metric in vars(metrics).values():
        if isinstance(metric, Counter):
            names.add(f"{metric._name}_total")
        elif isinstance(metric, Gauge):
            names.add(metric._name)
        elif isinstance(metric, Histogram):
            names.update(f"{metric._name}{suffix}" for suffix in ("_bucket", "_count", "_sum"))
    return names


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def queries(dashboard: dict[str, Any]) -> list[str]:
    return [
        target["expr"].replace("$__rate_interval", "5m")
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


def test_the_dashboard_queries_only_exported_metrics(dashboard: dict[str, Any]) -> None:
    used = {
        name for query in queries(dashboard) for name in re.findall(r"\bbilling_[a-z_]+", query)
    }
    used |= {"up"} if any(re.search(r"\bup\{", query) for query in queries(dashboard)) else set()
    assert used <= exported(), used - exported()


def test_the_dashboard_shows_every_part_operators_watch(dashboard: dict[str, Any]) -> None:
    text = " ".join(queries(dashboard))
    for name in (
        "billing_commands_finished_total",
        "billing_command_latency_seconds_bucket",
        "billing_command_retries_total",
        "billing_queue_depth",
        "billing_stripe_requests_total",
        "billing_stripe_rate_limited_total",
        "billing_stripe_budget_wait_seconds_total",
        "billing_scheduled_changes",
        "billing_oldest_due_change_age_seconds",
        "billing_apply_lag_seconds_bucket",
        "billing_http_requests_total",
        "billing_webhook_deliveries_total",
        "billing_webhook_deliveries",
        "billing_events_unpublished",
        "billing_sweep_last_success_timestamp_seconds",
        "billing_loop_silence_seconds",
    ):
        assert name in text, name


def test_panels_do_not_overlap_and_have_unique_ids(dashboard: dict[str, Any]) -> None:
    panels = dashboard["panels"]
    assert len({panel["id"] for panel in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, panel["title"]
                cells.add((x, y))


def test_promtool_accepts_every_query_of_the_dashboard(
    dashboard: dict[str, Any], tmp_path: Path
) -> None:
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query_{index}", "expr": query}
                    for index, query in enumerate(queries(dashboard))
                ],
            }
        ]
    }
    (tmp_path / "queries.yml").write_text(yaml.safe_dump(rules))
    checked = run_promtool("check", "rules", "queries.yml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
