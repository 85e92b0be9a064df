"""An idle `billing-worker up`, as an operator finds it: Flower lists the commands that ran,
not beat's sweeps; the worker's INFO lines are about commands; the sweeps that ran
meanwhile show in the worker's metrics."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from celery import Celery

from adapters.messaging.config import SWEEPS
from tests.support.stack import eventually
from worker.local.embedded import free_port

pytestmark = pytest.mark.e2e

FLOWER_AUTH = ("admin", "flower-pw")
IDLE_SECONDS = 30.0
"""Long enough for every frequent sweep to tick several times (due changes every second,
deliveries every 2 s, the relay every 5 s, reconciliation every 10 s)."""
COMMANDS = ("users.enable",)


@pytest.fixture(scope="module")
def idle_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data_dir = tmp_path_factory.mktemp("up")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BILLING_")}
    env.update({"BILLING_FLOWER_PASSWORD": FLOWER_AUTH[1], "BILLING_LOG_FORMAT": "json"})
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "worker.cli",
            "up",
            "--data-dir",
            str(data_dir),
            "--api-port",
            str(free_port()),
            "--flower-port",
            str(free_port()),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        stack_file = data_dir / "stack.json"
        eventually(lambda: stack_file.exists(), 60, "stack.json")
        stack: dict[str, Any] = json.loads(stack_file.read_text())
        eventually(lambda: _status(f"{stack['api_url']}/readyz") == 200, 60, "readiness")
        credentials = json.loads((data_dir / "demo-client.json").read_text())
        stack = {**stack, **credentials}
        yield {**stack, **_run_commands_then_idle(stack)}
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait(30)


def _status(url: str) -> int:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.HTTPError:
        return 0


def _flower_tasks(stack: dict[str, Any], **query: str) -> dict[str, dict[str, Any]]:
    tasks: dict[str, dict[str, Any]] = httpx.get(
        f"{stack['flower_url']}/api/tasks", params=query, auth=FLOWER_AUTH, timeout=5
    ).json()
    return tasks


def _ended(stack: dict[str, Any], task_id: str) -> dict[str, Any] | None:
    """The task as Flower shows it, once it ended (or ``None``)."""
    task = _flower_tasks(stack).get(task_id)
    return task if task and task.get("state") not in ("PENDING", "RECEIVED", "STARTED") else None


def _sweep_runs(stack: dict[str, Any]) -> dict[str, float]:
    """``billing_sweep_runs_total`` of each sweep that succeeded, from the worker's exporter."""
    text = httpx.get(stack["metrics_urls"]["worker"], timeout=5).text
    runs: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("billing_sweep_runs_total{") and 'outcome="succeeded"' in line:
            sweep = line.split('sweep="', 1)[1].split('"', 1)[0]
            runs[sweep] = float(line.rsplit(" ", 1)[1])
    return runs


def _run_commands_then_idle(stack: dict[str, Any]) -> dict[str, Any]:
    """A few commands over HTTP and on the queue, then quiet: what the worker logged and what
    the sweeps did while nothing else happened."""
    command_ids = []
    for _ in range(3):
        response = httpx.post(
            f"{stack['api_url']}/v1beta1/users/usr_demo/enable",
            json={},
            auth=(stack["client_id"], stack["client_secret"]),
            timeout=30,
        )
        assert response.status_code == 200, response.text
        command_ids.append(response.headers["Command-Id"])
    publisher = Celery("another-service", broker=stack["redis_url"])
    publisher.conf.update(task_serializer="json", accept_content=["json"])
    try:
        for _ in range(3):
            task_id = str(uuid.uuid4())
            publisher.send_task(
                "users.enable",
                queue="users",
                task_id=task_id,
                kwargs={"command_id": f"idle-{task_id}", "user_id": "usr_demo"},
            )
            command_ids.append(task_id)
    finally:
        publisher.close()
    eventually(
        lambda: all(
            _flower_tasks(stack).get(task_id, {}).get("state") == "SUCCESS"
            for task_id in command_ids
        ),
        60,
        "Flower to show the commands succeeded",
    )

    logs = Path(stack["logs"])
    marks = {name: (logs / name).stat().st_size for name in ("worker.log",)}
    runs_before = _sweep_runs(stack)
    time.sleep(IDLE_SECONDS)
    written = {
        name: (logs / name).read_bytes()[mark:].decode(errors="replace")
        for name, mark in marks.items()
    }
    return {
        "command_ids": command_ids,
        "written_while_idle": written,
        "sweep_runs_before": runs_before,
        "sweep_runs_after": _sweep_runs(stack),
        "flower_tasks": _flower_tasks(stack),
    }


def test_flower_lists_commands_and_no_sweeps_although_sweeps_ran(
    idle_stack: dict[str, Any],
) -> None:
    names = [task["name"] for task in idle_stack["flower_tasks"].values()]
    commands = [name for name in names if name in COMMANDS]
    ran = {
        sweep: idle_stack["sweep_runs_after"].get(sweep, 0)
        - idle_stack["sweep_runs_before"].get(sweep, 0)
        for sweep in SWEEPS
    }

    assert set(idle_stack["command_ids"]) <= set(idle_stack["flower_tasks"])
    assert len(commands) / len(names) >= 0.9, names
    assert [name for name in names if name in SWEEPS] == []
    # The sweeps did run meanwhile: the due-changes sweep ticks every second.
    assert ran["subscriptions.enqueue_due_changes"] >= IDLE_SECONDS / 2, ran
    assert ran["webhooks.send_due_deliveries"] >= IDLE_SECONDS / 4, ran


def _info_lines(text: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    return [line for line in lines if line["level"] == "INFO"]


def test_an_idle_workers_info_lines_are_about_commands_never_sweeps(
    idle_stack: dict[str, Any],
) -> None:
    worker_lines = _info_lines(idle_stack["written_while_idle"]["worker.log"])

    not_a_command = [
        line for line in worker_lines if not line.get("command_id") or line.get("task") in SWEEPS
    ]
    assert not_a_command == []


def test_flower_shows_a_caller_s_mistake_rejected_not_failed(
    idle_stack: dict[str, Any],
) -> None:
    publisher = Celery("another-service", broker=idle_stack["redis_url"])
    publisher.conf.update(task_serializer="json", accept_content=["json"])
    task_id = str(uuid.uuid4())
    try:
        publisher.send_task(
            "users.enable",
            queue="users",
            task_id=task_id,
            kwargs={"command_id": f"mistake-{task_id}", "user_id": "usr_nobody"},
        )
    finally:
        publisher.close()

    shown = eventually(lambda: _ended(idle_stack, task_id), 60, "Flower to show the command ended")

    assert shown["state"] == "REJECTED"
    assert shown["exception"].startswith("CommandRejected(NOT_FOUND (5): user ")
    assert task_id not in _flower_tasks(idle_stack, state="FAILURE")
    assert task_id in _flower_tasks(idle_stack, state="REJECTED")


def test_flower_reads_the_length_of_our_queues(idle_stack: dict[str, Any]) -> None:
    # Through our Redis client factory (worker/launch/flower.py): Flower's own reader knows
    # neither our guarded transport's URL scheme (it answered 404) nor our priority steps.
    response = httpx.get(
        f"{idle_stack['flower_url']}/api/queues/length", auth=FLOWER_AUTH, timeout=5
    )

    assert response.status_code == 200, response.text
    lengths = {queue["name"]: queue["messages"] for queue in response.json()["active_queues"]}
    assert {"users", "billing", "subscriptions", "maintenance", "webhooks"} <= set(lengths)
