"""The alert rules load in Prometheus and fire when they should: ``promtool check rules`` and
``promtool test rules`` (``deploy/prometheus/alerts.test.yml``: series that must page and
series that must not). Without promtool (Debian package ``prometheus``) the promtool tests are
skipped locally and fail in CI (``CI=true``); ``.ci/run`` installs it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support.promtool import run_promtool

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus"

EXPORTED = {
    # Recorded by the processes (adapters/observability/metrics.py) and computed by beat
    # (adapters/observability/gauges.py).
    "billing_oldest_due_change_age_seconds",
    "billing_failed_commands",
    "billing_queue_depth",
    "billing_stripe_rate_limited_total",
    "billing_stripe_budget_calls_total",
    "billing_collector_up",
    "billing_webhook_deliveries_total",
    "billing_events_unpublished",
    "billing_oldest_pending_account_age_seconds",
    "billing_subscriptions_off_plan",
    "billing_renewals_billed_wrong",
    "billing_sweep_last_success_timestamp_seconds",
    "billing_sweep_interval_seconds",
    "billing_loop_silence_seconds",
    "billing_loop_silence_limit_seconds",
    "up",
}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_promtool(*args, cwd=RULES)


def rules() -> list[dict[str, Any]]:
    loaded = yaml.safe_load((RULES / "alerts.yml").read_text())
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def test_promtool_accepts_the_alert_rules() -> None:
    checked = run("check", "rules", "alerts.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_promtool_accepts_the_scrape_configuration_and_the_rules_it_loads() -> None:
    checked = run("check", "config", "prometheus.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_each_alert_fires_on_the_series_it_is_for_and_not_on_the_others() -> None:
    tested = run("test", "rules", "alerts.test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_alert_has_a_summary_and_a_runbook_naming_what_to_run() -> None:
    for rule in rules():
        annotations = rule["annotations"]
        assert annotations["summary"], rule["alert"]
        runbook = annotations["runbook"]
        assert "Means:" in runbook, rule["alert"]
        assert "Do:" in runbook, rule["alert"]
        assert re.search(r"`(billing-worker|docker compose) [^`]+`", runbook), rule["alert"]


def test_every_alert_is_tested_firing() -> None:
    tests = yaml.safe_load((RULES / "alerts.test.yml").read_text())["tests"]
    fired = {
        case["alertname"]
        for test in tests
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert fired == {rule["alert"] for rule in rules()}


def test_the_alerts_use_only_metrics_the_system_exports() -> None:
    used = {
        name
        for rule in rules()
        for name in re.findall(r"\b(billing_[a-z_]+|up)\b(?=[{\[\s)]|$)", rule["expr"])
    }
    assert used <= EXPORTED, used - EXPORTED
