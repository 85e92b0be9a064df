"""docker-compose.yml cannot run here (no Docker engine), so it is validated instead.

``compose-spec.json`` beside this file is the Compose Specification's JSON Schema
(compose-spec/compose-spec, Apache-2.0).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


@pytest.fixture(scope="module")
def compose_ha() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.ha.yml").read_text())
    return loaded


@pytest.mark.parametrize("name", ["docker-compose.yml", "docker-compose.ha.yml"])
def test_the_compose_file_follows_the_compose_specification(name: str) -> None:
    schema = json.loads((Path(__file__).parent / "compose-spec.json").read_text())
    jsonschema.Draft7Validator(schema).validate(yaml.safe_load((ROOT / name).read_text()))


SENTINELS = ("sentinel-1", "sentinel-2", "sentinel-3")


def test_the_ha_variant_runs_the_same_system_on_a_primary_a_replica_and_three_sentinels(
    compose: dict[str, Any], compose_ha: dict[str, Any]
) -> None:
    redis = {"redis-primary", "redis-replica", *SENTINELS}
    assert set(compose_ha["services"]) == set(compose["services"]) - {"redis"} | redis
    replica = compose_ha["services"]["redis-replica"]["command"][-1]
    assert "--replicaof redis-primary 6379" in replica
    for server in ("redis-primary", "redis-replica"):
        script = compose_ha["services"][server]["command"][-1]
        assert "--appendonly yes" in script
        assert "$$REDIS_PASSWORD" in script  # expanded by the shell, inside
        assert f"--replica-announce-ip {server}" in script


def test_the_ha_variant_s_sentinels_monitor_the_primary_with_a_majority_quorum(
    compose_ha: dict[str, Any],
) -> None:
    for name in SENTINELS:
        sentinel = compose_ha["services"][name]
        script = sentinel["command"][-1]
        assert '"sentinel monitor billing-primary redis-primary 6379 2"' in script
        assert '"requirepass $$SENTINEL_PASSWORD"' in script
        assert script.endswith("exec redis-server /data/sentinel.conf --sentinel")
        assert sentinel["environment"]["ANNOUNCE"] == name
        assert sentinel["volumes"] == [f"{name}-data:/data"]  # keeps what it learnt


@pytest.mark.parametrize("service", ["api", "worker", "beat", "flower", "migrate"])
def test_every_process_of_the_ha_variant_finds_redis_through_the_sentinels_only(
    compose_ha: dict[str, Any], service: str
) -> None:
    environment = compose_ha["services"][service]["environment"]
    assert "BILLING_REDIS_URL" not in environment
    assert environment["BILLING_REDIS_SENTINELS"] == ",".join(f"{s}:26379" for s in SENTINELS)
    assert environment["BILLING_REDIS_MASTER_NAME"] == "billing-primary"
    assert "BILLING_REDIS_PASSWORD}" in environment["BILLING_REDIS_PASSWORD"]
    assert "BILLING_REDIS_SENTINEL_PASSWORD}" in environment["BILLING_REDIS_SENTINEL_PASSWORD"]
    if service != "migrate":
        depends = compose_ha["services"][service]["depends_on"]
        assert all(depends[s]["condition"] == "service_healthy" for s in SENTINELS)


def test_the_compose_file_runs_every_part_of_the_system(compose: dict[str, Any]) -> None:
    assert {"redis", "postgres", "migrate", "api", "worker", "beat", "flower"} <= set(
        compose["services"]
    )


def test_redis_keeps_its_data_with_append_only_persistence(compose: dict[str, Any]) -> None:
    script = compose["services"]["redis"]["command"][-1]
    assert "--appendonly yes" in script


def test_redis_requires_a_password_that_stays_off_its_command_line(
    compose: dict[str, Any],
) -> None:
    redis = compose["services"]["redis"]
    assert "requirepass" in redis["command"][-1]
    assert "$$REDIS_PASSWORD" in redis["command"][-1]  # expanded by the shell, inside
    assert "BILLING_REDIS_PASSWORD" in redis["environment"]["REDIS_PASSWORD"]


@pytest.mark.parametrize("service", ["api", "worker", "beat", "flower", "migrate"])
def test_every_process_reads_the_same_settings(compose: dict[str, Any], service: str) -> None:
    environment = compose["services"][service]["environment"]
    assert environment["BILLING_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert environment["BILLING_REDIS_URL"] == (
        "redis://:${BILLING_REDIS_PASSWORD:?set BILLING_REDIS_PASSWORD}@redis:6379/0"
    )


def test_processes_start_after_the_migration_completed(compose: dict[str, Any]) -> None:
    for service in ("api", "worker", "beat"):
        depends = compose["services"][service]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully"


def test_the_dockerfile_it_builds_exists(compose: dict[str, Any]) -> None:
    build = compose["services"]["migrate"]["build"]
    assert (ROOT / build["context"] / build["dockerfile"]).is_file()


def test_clients_reach_the_api_through_a_proxy_with_timeouts_for_slow_requests(
    compose: dict[str, Any],
) -> None:
    proxy = compose["services"]["proxy"]
    assert proxy["ports"] == ["8080:8080"]
    assert "ports" not in compose["services"]["api"]
    [mount] = proxy["volumes"]
    config = (ROOT / mount.split(":")[0]).read_text()
    for directive in (
        "client_header_timeout 10s",
        "client_body_timeout 10s",
        "large_client_header_buffers 4 16k",
        "client_max_body_size 4m",
        "proxy_pass http://api:8080",
    ):
        assert directive in config


def test_the_stripe_emulator_runs_from_an_image_of_its_own(compose: dict[str, Any]) -> None:
    emulator = compose["services"]["stripe-emulator"]
    build = emulator["build"]
    assert (ROOT / build["context"] / build.get("dockerfile", "Dockerfile")).is_file()
    assert emulator["image"] != compose["services"]["api"]["image"]


def test_the_billing_worker_image_leaves_the_stripe_emulator_out() -> None:
    copied = [
        line.split()[1]
        for line in (ROOT / "worker" / "Dockerfile").read_text().splitlines()
        if line.startswith("COPY ")
    ]
    assert not any("stripe_emulator" in source for source in copied)
    assert "." not in copied


def prometheus_config(compose: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Path]]:
    """prometheus.yml as the prometheus service mounts it, and its mounts (in the container →
    on the host)."""
    mounts = {
        target: ROOT / source
        for source, target, *_ in (
            volume.split(":") for volume in compose["services"]["prometheus"]["volumes"]
        )
        if source.startswith("./")
    }
    config: dict[str, Any] = yaml.safe_load(mounts["/etc/prometheus/prometheus.yml"].read_text())
    return config, mounts


def test_prometheus_scrapes_services_of_the_compose_file_on_their_metrics_ports(
    compose: dict[str, Any],
) -> None:
    config, _ = prometheus_config(compose)
    services = compose["services"]
    targets: dict[str, tuple[str, int]] = {}
    for job in config["scrape_configs"]:
        for static in job.get("static_configs", []):
            for target in static["targets"]:
                host, port = target.split(":")
                targets[job["job_name"]] = (host, int(port))
        for dns in job.get("dns_sd_configs", []):
            for name in dns["names"]:
                targets[job["job_name"]] = (name, int(dns["port"]))
    assert set(targets) == {"billing-api", "billing-worker", "billing-beat"}
    for host, port in targets.values():
        assert host in services, host
        assert str(port) in services[host]["expose"], (host, port)
    assert services["worker"]["environment"]["BILLING_WORKER_METRICS_PORT"] == str(
        targets["billing-worker"][1]
    )
    assert services["beat"]["environment"]["BILLING_BEAT_METRICS_PORT"] == str(
        targets["billing-beat"][1]
    )
    for service in ("worker", "beat"):
        assert services[service]["environment"]["BILLING_METRICS_HOST"] == "0.0.0.0"


def test_the_proxy_keeps_the_apis_metrics_inside_the_compose_network(
    compose: dict[str, Any],
) -> None:
    [mount] = compose["services"]["proxy"]["volumes"]
    config = (ROOT / mount.split(":")[0]).read_text()
    assert re.search(r"location = /metrics \{\s*return 404;\s*\}", config)


def test_prometheus_loads_the_alert_rules_it_is_mounted_with(compose: dict[str, Any]) -> None:
    config, mounts = prometheus_config(compose)
    # Relative rule files are read beside the configuration file.
    in_container = [f"/etc/prometheus/{rule_file}" for rule_file in config["rule_files"]]
    assert [mounts[path] for path in in_container] == [
        ROOT / "deploy" / "prometheus" / "alerts.yml"
    ]


@pytest.mark.parametrize("name", ["docker-compose.yml", "docker-compose.ha.yml"])
def test_the_api_believes_forwarded_addresses_from_the_proxy_s_network_only(name: str) -> None:
    text = (ROOT / name).read_text()
    loaded = yaml.safe_load(text)
    services = loaded["services"]
    subnet = loaded["networks"]["edge"]["ipam"]["config"][0]["subnet"]
    assert "FORWARDED_ALLOW_IPS" not in text  # uvicorn's own trust, of any address
    assert services["proxy"]["networks"] == ["edge"]
    assert set(services["api"]["networks"]) == {"default", "edge"}
    assert [s for s, service in services.items() if "edge" in service.get("networks", [])] == [
        "proxy",
        "api",
    ]
    assert services["api"]["environment"]["BILLING_API_TRUSTED_PROXIES"] == subnet
    [mount] = services["proxy"]["volumes"]
    config = (ROOT / mount.split(":")[0]).read_text()
    # What nginx saw, never the caller's own entries passed on.
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in config
    assert "$proxy_add_x_forwarded_for" not in config
