from __future__ import annotations

import json
from pathlib import Path

import pytest

from worker.local.stack_state import with_local_stack
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

    resolved = with_local_stack(Settings(data_dir=tmp_path))

    assert resolved.resolved_redis_url() == "redis://127.0.0.1:4242/0"


def test_the_settings_alone_never_read_what_up_recorded(tmp_path: Path) -> None:
    (tmp_path / "stack.json").write_text('{"redis_url": "redis://127.0.0.1:4242/0"}')

    assert Settings(data_dir=tmp_path).resolved_redis_url() == "redis://127.0.0.1:6379/0"


def test_a_redis_named_in_the_environment_wins_over_the_one_up_recorded(tmp_path: Path) -> None:
    (tmp_path / "stack.json").write_text('{"redis_url": "redis://127.0.0.1:4242/0"}')

    resolved = with_local_stack(Settings(data_dir=tmp_path, redis_url="redis://cache:6379/3"))

    assert resolved.resolved_redis_url() == "redis://cache:6379/3"


def test_a_stopped_stack_hands_its_emulator_s_address_but_neither_its_key_nor_its_clock(
    tmp_path: Path,
) -> None:
    recorded = {
        "stripe_emulator_url": "http://127.0.0.1:12111",
        "stripe_emulator_api_key": "sk_test_emulated",
        "shiftable_clock": True,
        "stopped": True,
    }
    (tmp_path / "stack.json").write_text(json.dumps(recorded))

    resolved = with_local_stack(Settings(data_dir=tmp_path))

    assert resolved.stripe_api_base == "http://127.0.0.1:12111"
    assert resolved.resolved_stripe_api_key() is None
    assert resolved.shiftable_clock is False
    assert resolved.resolved_webhook_allow_private_networks() is False


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
