"""A worker node that stays connected to Redis but stops consuming is seen within two minutes.

How the consumer is frozen: Celery's own remote control, ``cancel_consumer``, for every queue
the node consumes (its task queues and its own ``NODE.dq2``). The node keeps running, keeps
its connection to Redis, its event loop, its timers and its exporter; it answers
``celery inspect ping`` (and so the API's ``/readyz`` worker check); it only stops taking
messages off Redis: what celery#10096 reports after a Redis restart (a consumer reconnected
that never consumes again). ``SIGSTOP`` would freeze the whole process, its timers and its
exporter with it: a dead node, which ``BillingWorkerDown`` already catches, and no proof
that the heartbeat tells consumption from liveness (its sender, the node's timer, keeps
running here: only the consumption of what it sends stops).

The settings are the defaults (a heartbeat every 10 s, silent after 60 s): the time printed is
what an operator gets. The application's clock is moved a month ahead first, as the README's
``clock advance 31d`` does: no loop looks silent for it.
"""

from __future__ import annotations

import socket
import time

import httpx
import pytest
from celery.utils.nodenames import worker_direct
from prometheus_client.parser import text_string_to_metric_families

from adapters.messaging.config import CONSUMED_QUEUES
from adapters.messaging.consumer_heartbeat import consumer_loop
from tests.chaos.conftest import StackFactory
from tests.support.stack import Stack, eventually
from worker.celery_app import create_celery_app
from worker.settings import Settings

pytestmark = pytest.mark.chaos

TWO_MINUTES = 120.0


def loops(url: str, name: str) -> dict[str, float]:
    """Each loop's sample of ``name`` that an exporter serves now (empty: none, or the
    exporter does not answer)."""
    try:
        text = httpx.get(url, timeout=5).text
    except httpx.HTTPError:
        return {}
    return {
        found.labels["loop"]: found.value
        for family in text_string_to_metric_families(text)
        for found in family.samples
        if found.name == name
    }


def node_of(stack: Stack, name: str) -> str:
    """The node name ``Stack.start_worker`` gave a worker (``-n NAME-STACK@%h``)."""
    return f"{name}-{stack.name}@{socket.gethostname()}"


def stop_consuming(stack: Stack, node: str) -> None:
    """``node`` stops consuming every queue it consumed; it runs on, connected."""
    app = create_celery_app(Settings(redis_url=stack.redis_url))
    try:
        for queue in (*CONSUMED_QUEUES, worker_direct(node).name):
            replies = app.control.cancel_consumer(queue, destination=[node], reply=True)
            assert replies, f"{node} did not answer cancel_consumer({queue})"
        assert any(node in reply for reply in app.control.ping(timeout=2.0) or []), (
            f"{node} no longer answers pings: it was meant to stay up"
        )
    finally:
        app.close()


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_worker_node_that_stays_connected_but_stops_consuming_shows_silent_within_two_minutes(
    make_stack: StackFactory,
) -> None:
    stack = make_stack({})
    stack.start_worker("w1", concurrency=1)
    stack.start_worker("w2", concurrency=1)
    stack.start_beat()
    api = stack.start_api()
    frozen, running = consumer_loop(node_of(stack, "w1")), consumer_loop(node_of(stack, "w2"))
    host = socket.gethostname()
    every_loop = {frozen, running, f"beat:{host}", f"failover-watch:{host}", "sweep:events.relay"}

    def beating() -> dict[str, float] | None:
        found = loops(stack.beat_metrics_url, "billing_loop_silent")
        listeners = [loop for loop in found if loop.startswith(f"result-listener:{host}:")]
        return found if found.keys() >= every_loop and listeners else None

    eventually(beating, 60, "every loop's heartbeat", interval=1.0)
    # billing-worker clock advance 31d: heartbeats are judged on Redis's clock, not this one.
    stack.advance_time(31 * 86_400)
    time.sleep(2)
    before = loops(stack.beat_metrics_url, "billing_loop_silent")
    assert set(before.values()) == {0}, before

    stop_consuming(stack, node_of(stack, "w1"))
    stopped_at = time.monotonic()
    eventually(
        lambda: loops(stack.beat_metrics_url, "billing_loop_silent").get(frozen) == 1,
        TWO_MINUTES + 30,
        "the frozen consumer to show silent",
        interval=1.0,
    )
    took = time.monotonic() - stopped_at
    print(
        f"\nthe frozen consumer showed silent (billing_loop_silent=1) {took:.1f} s after it stopped"
    )
    assert took < TWO_MINUTES

    now = loops(stack.beat_metrics_url, "billing_loop_silent")
    assert now[running] == 0
    silence = loops(stack.beat_metrics_url, "billing_loop_silence_seconds")
    assert silence[frozen] > 60 > silence[running]
    answer = httpx.get(f"{api}/readyz", timeout=10)
    assert answer.status_code == 200, answer.text
    assert frozen in answer.json()["silent_loops"]
    assert running not in answer.json()["silent_loops"]
