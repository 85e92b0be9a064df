from __future__ import annotations

from pathlib import Path

import pytest

from worker.settings import Settings


def test_defaults_are_embedded_and_need_no_configuration(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings()
    assert (
        settings.resolved_database_url()
        == f"sqlite:///{tmp_path / '.billing-worker' / 'billing.db'}"
    )
    assert settings.stripe_api_key is None
    assert settings.http_wait_timeout_seconds == 10
    assert settings.beat_interval_seconds == 5


def test_settings_are_read_from_billing_environment_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BILLING_DATABASE_URL", "postgresql+psycopg://db/billing")
    monkeypatch.setenv("BILLING_REDIS_URL", "redis://cache:6379/3")
    monkeypatch.setenv("BILLING_HTTP_WAIT_TIMEOUT_SECONDS", "2.5")
    settings = Settings()
    assert settings.resolved_database_url() == "postgresql+psycopg://db/billing"
    assert settings.resolved_redis_url() == "redis://cache:6379/3"
    assert settings.http_wait_timeout_seconds == 2.5


def test_other_commands_find_the_redis_that_up_started(tmp_path: Path) -> None:
    (tmp_path / "stack.json").write_text('{"redis_url": "redis://127.0.0.1:4242/0"}')
    assert Settings(data_dir=tmp_path).resolved_redis_url() == "redis://127.0.0.1:4242/0"


def test_processes_log_json_lines_by_default_and_up_s_children_console_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from worker.local.start import children_log_format

    monkeypatch.delenv("BILLING_LOG_FORMAT", raising=False)
    assert Settings().log_format == "json"
    assert children_log_format(Settings()) == "console"


def test_up_s_children_log_json_lines_when_the_environment_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from worker.local.start import children_log_format

    monkeypatch.setenv("BILLING_LOG_FORMAT", "json")

    assert children_log_format(Settings().model_copy(update={"api_port": 9000})) == "json"


def test_personal_data_is_masked_unless_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BILLING_MASK_PERSONAL_DATA", raising=False)
    assert Settings().mask_personal_data is True
    monkeypatch.setenv("BILLING_MASK_PERSONAL_DATA", "false")
    assert Settings().mask_personal_data is False


def test_production_settings_carry_no_benchmark_switch() -> None:
    # A benchmark goes without a capability through its own composition
    # (tests/benchmarks/workers/), never through a setting an operator could leave on.
    assert [name for name in Settings.model_fields if "bench" in name] == []
