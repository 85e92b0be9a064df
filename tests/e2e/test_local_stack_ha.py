"""`billing-worker up --ha` tried as a new user would: one command starts a primary, a replica
and three sentinels beside the stack; `kill -9` of the primary leaves the demo working without
touching anything (the replica is promoted, the old primary comes back as its replica); and
`billing-worker down` stops every process `up` started; and the clock moved on `up` is the
clock of `up --ha` on the same data directory, and back."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.e2e.test_local_stack_lifecycle import Up, start_up
from tests.support.stack import eventually
from worker.local.stack_lock import is_held

pytestmark = pytest.mark.e2e

FAILOVER_SECONDS = 60.0
"""How long the test waits for the sentinels to promote the replica (about 6 s here)."""


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    started = start_up(tmp_path_factory.mktemp("ha"), "--ha")
    try:
        yield started
    finally:
        started.stop()


def status(up: Up) -> dict[str, Any]:
    done = up.cli("status", "--json")
    assert done.status == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def enable_the_demo_user(up: Up) -> str:
    """``POST .../users/usr_demo/enable`` with the demo client; the accepted command's id."""
    client_id, secret = up.secret()
    response = httpx.post(
        f"{up.stack['api_url']}/v1beta1/users/usr_demo/enable",
        json={},
        auth=(client_id, secret),
        timeout=60,
    )
    assert response.status_code in (200, 202), response.text
    return response.headers["Command-Id"]


def command_status(up: Up, command_id: str) -> str:
    response = httpx.get(
        f"{up.stack['api_url']}/v1beta1/commands/{command_id}", auth=up.secret(), timeout=10
    )
    assert response.status_code == 200, response.text
    return str(response.json()["status"])


def test_up_ha_configures_every_process_with_the_sentinels_only_and_shows_the_topology(
    up: Up,
) -> None:
    ha = up.stack["redis_ha"]
    shown = status(up)["redis"]

    assert up.stack["redis_url"] is None
    assert len(ha["servers"]) == 2
    assert len(ha["sentinels"]) == 3
    assert len(ha["sentinel_addresses"].split(",")) == 3
    primary = ha["servers"][ha["primary"]]
    assert f":{primary['port']} (pid {primary['pid']})" in up.printed("Redis")
    assert shown["primary"] == ha["primary"]
    assert [m["role"] for m in shown["members"]] == ["primary", "replica", *["sentinel"] * 3]
    assert all(member["answers"] for member in shown["members"])
    # The CLI finds Redis through stack.json's sentinels (no Redis setting of its own).
    assert up.cli("dead-letters", "list").status == 0


def test_kill_9_of_the_primary_leaves_the_demo_working_without_touching_anything(
    up: Up,
) -> None:
    before = up.stack["redis_ha"]
    old_primary = before["primary"]

    os.kill(before["servers"][old_primary]["pid"], signal.SIGKILL)
    # The API's first command, sent while no primary is elected: recorded, never a 500.
    during = enable_the_demo_user(up)
    after = eventually(
        lambda: (
            (shown := status(up)["redis"])["primary"] not in (None, old_primary)
            and all(member["answers"] for member in shown["members"])
            and shown
        ),
        FAILOVER_SECONDS,
        "the replica promoted and the old primary back as its replica",
        interval=0.5,
    )
    command_id = enable_the_demo_user(up)

    eventually(
        lambda: command_status(up, command_id) == "succeeded",
        FAILOVER_SECONDS,
        "the command accepted after the failover to succeed",
        interval=0.5,
    )
    roles = {member["name"]: member["role"] for member in after["members"]}
    assert roles[old_primary] == "replica"
    assert command_status(up, during) in ("queued", "succeeded")
    assert up.process.poll() is None  # `up` itself kept running


def test_down_stops_every_process_up_started_the_restarted_server_too(up: Up) -> None:
    ha = up.stack["redis_ha"]
    pids = [member["pid"] for member in (*ha["servers"].values(), *ha["sentinels"].values())]
    assert is_held(up.data_dir)

    done = up.cli("down")

    assert done.status == 0, done.stderr
    assert up.process.wait(30) == 0
    # Every process `up` starts inherits its lock: free once the last one has exited.
    assert is_held(up.data_dir) is False
    assert not [pid for pid in pids if alive(pid)]
    assert httpx_status(f"{up.stack['api_url']}/healthz") == 0


def httpx_status(url: str) -> int:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.HTTPError:
        return 0


def test_up_ha_again_starts_the_last_primary_as_the_primary_with_its_data(up: Up) -> None:
    if up.process.poll() is None:  # the test before stops it, when it ran in this process
        assert up.cli("down").status == 0
        assert up.process.wait(30) == 0
    last = up.stack["redis_ha"]

    again = start_up(up.data_dir, "--ha")
    try:
        assert again.stack["redis_ha"]["primary"] == last["primary"]
        # The demo client's secret and the clock live in the database and in Redis: both kept.
        assert command_status(again, enable_the_demo_user(again)) == "succeeded"
    finally:
        again.stop()
    assert is_held(up.data_dir) is False


def shown_clock(up: Up) -> dict[str, Any]:
    done = up.cli("clock", "show", "--json")
    assert done.status == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


def clock_on_the_console(up: Up) -> str:
    """The home page's clock line, as the demo client sees it."""
    page = httpx.get(f"{up.stack['api_url']}/console", auth=up.secret(), timeout=30)
    assert page.status_code == 200, page.text
    [line] = [part for part in page.text.split("<p ") if part.startswith('class="clock')]
    return line


@pytest.mark.timeout(300)  # three starts of `up`, each 15-40 s on a busy box
def test_the_clock_moved_on_up_is_the_clock_of_up_ha_on_that_data_and_back(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    data_dir = tmp_path_factory.mktemp("one-clock")
    plain = start_up(data_dir)
    try:
        assert plain.cli("clock", "advance", "31d", "--reason", "renewals").status == 0
    finally:
        plain.stop()

    ha = start_up(data_dir, "--ha")  # its Redis data is its own: it never held the offset
    try:
        ha_banner, ha_clock = ha.printed("Clock"), shown_clock(ha)
        ha_console = clock_on_the_console(ha)
        assert ha.cli("clock", "advance", "1d", "--reason", "renewals").status == 0
    finally:
        ha.stop()

    again = start_up(data_dir)  # its Redis data still says 31 days
    try:
        again_banner, again_clock = again.printed("Clock"), shown_clock(again)
    finally:
        again.stop()

    assert ha_banner.startswith("31.00 days ahead of real time: ")
    assert ha_clock["offset_seconds"] == 31 * 86_400
    shifted, stripe = (
        datetime.fromisoformat(ha_clock[key]) for key in ("now", "stripe_emulator_now")
    )
    assert abs((stripe - shifted).total_seconds()) < 5
    assert "31.00 days ahead of real time" in ha_console
    assert again_banner.startswith("32.00 days ahead of real time: ")
    assert again_clock["offset_seconds"] == 32 * 86_400
