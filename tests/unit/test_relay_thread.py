"""The worker process's background relay (``adapters/outbound/relay_thread.py``): a request is
never lost, an idle process relays at once, and a burst of requests shares a few runs."""

from __future__ import annotations

import threading
import time

import pytest

from adapters.outbound.relay_thread import CoalescingRelay, NodeRelays


class Relays:
    def __init__(self, seconds: float = 0.0) -> None:
        self.runs = 0
        self.seconds = seconds
        self.ran = threading.Event()

    def __call__(self) -> bool:
        time.sleep(self.seconds)
        self.runs += 1
        self.ran.set()
        return True


def test_an_idle_process_relays_as_soon_as_a_command_asks() -> None:
    # An interval far longer than the wait below: a relay that waited for it never runs.
    relay, relays = CoalescingRelay(min_interval=3600.0), Relays()

    relay.request(relays)

    assert relays.ran.wait(60.0)
    relay.flush()


def test_a_burst_of_requests_shares_a_few_runs_and_the_last_one_is_served() -> None:
    relay, relays = CoalescingRelay(min_interval=0.05), Relays(seconds=0.01)

    for _ in range(200):
        relay.request(relays)
        time.sleep(0.001)
    served_before = relays.runs
    relays.ran.clear()
    relay.request(relays)

    assert relays.ran.wait(2.0)
    assert 1 <= served_before < 20
    relay.flush()


def test_a_process_that_stops_runs_the_relay_it_asked_for_first() -> None:
    relay, relays = CoalescingRelay(min_interval=10.0), Relays()
    relay.request(relays)
    assert relays.ran.wait(2.0)

    relay.request(relays)  # within the interval: it would wait 10 s
    relay.flush(timeout=2.0)

    assert relays.runs == 2


def test_a_failing_relay_is_logged_and_the_next_request_still_runs() -> None:
    relay, relays = CoalescingRelay(min_interval=0.0), Relays()

    failed = threading.Event()

    def failing() -> bool:
        failed.set()
        raise ConnectionError("redis is down")

    relay.request(failing)
    assert failed.wait(2.0)
    relay.request(relays)

    assert relays.ran.wait(2.0)
    relay.flush()


def test_a_relay_that_found_the_lock_taken_runs_again_after_the_pause() -> None:
    relay, relays = CoalescingRelay(min_interval=0.05), Relays()
    answers = iter([False, False])

    def busy_twice() -> bool:
        return next(answers, None) is not False and relays()

    relay.request(busy_twice)

    assert relays.ran.wait(2.0)
    assert relays.runs == 1
    relay.flush()


def test_a_process_leaves_its_events_to_a_relay_another_process_of_its_node_began_later() -> None:
    node = NodeRelays()
    this, other = CoalescingRelay(min_interval=3600.0, node=node), CoalescingRelay(0.0, node=node)
    mine, theirs = Relays(), Relays()
    this.request(mine)  # idle: relays at once
    assert mine.ran.wait(2.0)

    this.request(mine)  # within the interval: waits, unless another relay serves it
    other.request(theirs)  # began after this process asked: reads its events
    assert theirs.ran.wait(2.0)
    other.flush()
    this.flush(timeout=2.0)  # cuts the pause short: what it asked for is served already

    assert (mine.runs, theirs.runs) == (1, 1)


def test_a_process_relays_itself_when_its_node_s_latest_relay_began_before_it_asked() -> None:
    node = NodeRelays()
    this, other = CoalescingRelay(min_interval=3600.0, node=node), CoalescingRelay(0.0, node=node)
    mine, theirs = Relays(), Relays()
    this.request(mine)
    assert mine.ran.wait(2.0)
    other.request(theirs)
    assert theirs.ran.wait(2.0)
    other.flush()

    this.request(mine)  # after the other relay began: it may not have read this one's events
    this.flush(timeout=2.0)

    assert (mine.runs, theirs.runs) == (2, 1)


def test_processes_of_different_nodes_each_relay() -> None:
    this = CoalescingRelay(min_interval=3600.0, node=NodeRelays())
    other = CoalescingRelay(0.0, node=NodeRelays())
    mine, theirs = Relays(), Relays()
    this.request(mine)
    assert mine.ran.wait(2.0)

    this.request(mine)
    other.request(theirs)
    assert theirs.ran.wait(2.0)
    other.flush()
    this.flush(timeout=2.0)

    assert (mine.runs, theirs.runs) == (2, 1)


def test_a_node_grants_one_relay_slot_per_interval_whichever_process_asks() -> None:
    node = NodeRelays()

    assert node.take_slot(100.0, interval=0.05) == 0.0
    assert node.take_slot(100.01, interval=0.05) == pytest.approx(0.04)  # another process
    assert node.take_slot(100.02, interval=0.05) == pytest.approx(0.03)
    assert node.take_slot(100.05, interval=0.05) == 0.0
    assert node.take_slot(100.06, interval=0.05) > 0


def test_two_busy_processes_of_a_node_relay_once_per_interval_between_them() -> None:
    node, interval = NodeRelays(), 0.1
    this, other = CoalescingRelay(interval, node=node), CoalescingRelay(interval, node=node)
    relays = Relays(seconds=0.005)

    started = time.monotonic()
    for _ in range(300):
        this.request(relays)
        other.request(relays)
        time.sleep(0.002)
    this.flush()
    other.flush()
    elapsed = time.monotonic() - started

    # Each process on its own interval relayed about twice as often (once per interval each).
    assert 1 <= relays.runs <= elapsed / interval + 3
