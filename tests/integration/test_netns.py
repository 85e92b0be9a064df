"""The partitions of the chaos tests (tests/support/netns.py): a cut link answers nothing, a
healed one carries traffic again, and what a dead session left is removed."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from tests.support.netns import (
    DEVICE_PREFIX,
    NAMESPACE_PREFIX,
    namespace,
    remove_stale,
    require_namespaces,
)
from worker.local.embedded import free_port

DEAD_PID = 4_194_305
"""Above the largest pid Linux hands out (``PID_MAX_LIMIT`` is 4194304): no process has it."""


def _ip(*args: str) -> str:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=True).stdout


def connects(host: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def test_a_cut_link_answers_nothing_and_a_healed_one_connects_again() -> None:
    require_namespaces()
    with namespace("probe") as inside:
        link = inside.add_link()
        port = free_port()
        listener = subprocess.Popen(
            [
                *inside.exec_prefix,
                sys.executable,
                "-c",
                "import socket, sys; s = socket.create_server((sys.argv[1], int(sys.argv[2])));"
                " [s.accept() for _ in range(10)]",
                link.namespace_address,
                str(port),
            ]
        )
        try:
            deadline = time.monotonic() + 10
            while not connects(link.namespace_address, port, 0.5):
                assert time.monotonic() < deadline, "the listener in the namespace never answered"
            link.cut()
            started = time.monotonic()
            assert not connects(link.namespace_address, port, 1.0)
            # No refusal: the attempt waited out its timeout, as across a real partition.
            assert time.monotonic() - started >= 0.9
            link.heal()
            assert connects(link.namespace_address, port, 5.0)
        finally:
            listener.kill()
            listener.wait()
    assert inside.name not in _ip("netns", "list")


def test_what_a_dead_session_left_is_removed_and_a_live_one_s_is_kept() -> None:
    require_namespaces()
    stale_namespace = f"{NAMESPACE_PREFIX}-{DEAD_PID}-1-left"
    stale_device = f"{DEVICE_PREFIX}{DEAD_PID}r1"
    _ip("netns", "add", stale_namespace)
    _ip("link", "add", stale_device, "type", "veth", "peer", "name", f"{DEVICE_PREFIX}{DEAD_PID}n1")
    try:
        with namespace("live") as live:
            live.add_link()
            removed = remove_stale()
            assert stale_namespace in removed
            assert live.name in _ip("netns", "list")
        assert stale_namespace not in _ip("netns", "list")
        assert stale_device not in _ip("-o", "link", "show")
    finally:
        subprocess.run(["ip", "netns", "delete", stale_namespace], capture_output=True, check=False)
        subprocess.run(["ip", "link", "delete", stale_device], capture_output=True, check=False)


@pytest.mark.parametrize("tag", ["x" * 80])
def test_a_long_tag_still_makes_a_namespace(tag: str) -> None:
    require_namespaces()
    with namespace(tag) as made:
        assert made.name in _ip("netns", "list")
