"""POST /v1beta1/users/{id}/enable: HTTP → Redis → worker process → database → HTTP."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import text

from adapters.clock import SystemClock
from adapters.db.engine import get_engine
from tests.support.locks import user_row_locked
from tests.support.records import create_user, user_state
from tests.support.stack import Stack, another_api, basic, eventually
from worker.celery_app import create_celery_app
from worker.settings import Settings

pytestmark = pytest.mark.e2e


def disabled_user(stack: Stack) -> str:
    user = create_user(
        stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@example.com", disabled=True
    )
    return str(user.id)


def enable(http: httpx.Client, user_id: str, **kwargs: object) -> httpx.Response:
    return http.post(f"/v1beta1/users/{user_id}/enable", json={}, **kwargs)  # type: ignore[arg-type]


def test_enabling_a_disabled_user_answers_empty_object_and_enables_it(stack: Stack) -> None:
    user_id = disabled_user(stack)
    with stack.http() as http:
        response = enable(http, user_id)
    assert response.status_code == 200
    assert response.json() == {}
    assert user_state(stack.sessions, user_id) == "enabled"
    record = stack.command(response.headers["Command-Id"])
    assert (record.status.value, record.type, record.source) == ("succeeded", "users.enable", "api")


def test_enabling_an_enabled_user_succeeds_again(stack: Stack) -> None:
    user_id = disabled_user(stack)
    with stack.http() as http:
        assert enable(http, user_id).status_code == 200
        again = enable(http, user_id)
    assert again.status_code == 200
    assert stack.command(again.headers["Command-Id"]).result == {
        "user_id": user_id,
        "was_already_enabled": True,
    }


def test_an_unknown_user_is_a_404_in_the_spec_error_body(stack: Stack) -> None:
    with stack.http() as http:
        response = enable(http, "usr_does_not_exist")
    assert response.status_code == 404
    body = response.json()
    assert body["code"] == 5
    assert "usr_does_not_exist" in body["message"]
    assert body["details"][0]["@type"] == "type.googleapis.com/google.rpc.ResourceInfo"
    record = stack.command(response.headers["Command-Id"])
    assert record.status.value == "rejected"
    assert record.attempts == 1, "a not-found outcome must not be retried"


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer abc", basic("nobody", "secret"), "Basic !!!not-base64", basic("", "x")],
)
def test_missing_or_invalid_credentials_are_401_with_a_basic_challenge(
    stack: Stack, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    response = httpx.post(f"{stack.api_url}/v1beta1/users/usr_x/enable", json={}, headers=headers)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Basic")
    assert response.json()["code"] == 16


def test_a_wrong_secret_for_a_real_client_is_401(stack: Stack) -> None:
    assert stack.client is not None
    response = httpx.post(
        f"{stack.api_url}/v1beta1/users/usr_x/enable",
        json={},
        auth=(stack.client.client_id, "wrong"),
    )
    assert response.status_code == 401


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ("[]", "body"),
        ('"x"', "body"),
        ("{not json", "body"),
        ('{"force": true}', "force"),
        ("", "body"),
    ],
)
def test_a_body_that_is_not_an_empty_json_object_is_400(
    stack: Stack, content: str, field: str
) -> None:
    with stack.http() as http:
        response = http.post(
            "/v1beta1/users/usr_x/enable",
            content=content,
            headers={"Content-Type": "application/json"},
        )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == 3
    assert body["details"][0]["fieldViolations"][0]["field"] == field


def test_a_malformed_user_id_is_400_naming_the_path_parameter(stack: Stack) -> None:
    with stack.http() as http:
        response = enable(http, "bad%20id")
    assert response.status_code == 400
    assert response.json()["details"][0]["fieldViolations"][0]["field"] == "id"


def test_prefer_respond_async_answers_202_with_a_location_to_follow(stack: Stack) -> None:
    user_id = disabled_user(stack)
    with stack.http() as http:
        response = enable(http, user_id, headers={"Prefer": "respond-async"})
        assert response.status_code == 202
        location = response.headers["Location"]
        body = response.json()
        assert location == f"/v1beta1/commands/{body['command_id']}"
        assert body["status"] in ("queued", "running", "succeeded")
        final = eventually(
            lambda: (r := http.get(location)).json()["status"] == "succeeded" and r, what="success"
        )
    assert final.json()["result"] == {"user_id": user_id, "was_already_enabled": False}


def test_a_synchronous_wait_that_runs_out_answers_202_without_claiming_a_preference(
    stack: Stack,
) -> None:
    assert stack.client is not None
    user_id = disabled_user(stack)
    # An API that waits no time at all: its every synchronous wait runs out.
    with (
        another_api(stack, "api-no-wait", BILLING_HTTP_WAIT_TIMEOUT_SECONDS="0") as url,
        httpx.Client(
            base_url=url, auth=(stack.client.client_id, stack.client.secret), timeout=30
        ) as http,
    ):
        waited = enable(http, user_id)
        asked = enable(http, disabled_user(stack), headers={"Prefer": "respond-async"})

    assert waited.status_code == 202, waited.text
    assert waited.headers["Location"] == f"/v1beta1/commands/{waited.json()['command_id']}"
    assert "Preference-Applied" not in waited.headers
    assert asked.status_code == 202
    assert asked.headers["Preference-Applied"] == "respond-async"


def test_the_same_idempotency_key_returns_the_same_command(stack: Stack) -> None:
    user_id = disabled_user(stack)
    key = uuid.uuid4().hex
    with stack.http() as http:
        first = enable(http, user_id, headers={"Idempotency-Key": key})
        second = enable(http, user_id, headers={"Idempotency-Key": key})
    assert first.status_code == second.status_code == 200
    assert first.headers["Command-Id"] == second.headers["Command-Id"]
    assert stack.command(first.headers["Command-Id"]).attempts == 1


def test_two_requests_racing_with_one_idempotency_key_are_answered_with_one_command(
    stack: Stack,
) -> None:
    if stack.database_url.startswith("sqlite"):
        pytest.skip(
            "SQLite shows no writer waiting on its lock; its command log's DuplicateCommand "
            "is proven in tests/integration/test_database.py"
        )
    user_id = disabled_user(stack)
    key = uuid.uuid4().hex
    with get_engine(stack.database_url).connect() as holder:
        # Reads go on, inserts wait: both requests find no command under the key, then both
        # record one; the loser's insert breaks the unique index (DuplicateCommand).
        holder.execute(text("LOCK TABLE commands IN SHARE MODE"))
        with (
            stack.http() as first_http,
            stack.http() as second_http,
            ThreadPoolExecutor(2) as pool,
        ):
            answers = [
                pool.submit(enable, http, user_id, headers={"Idempotency-Key": key})
                for http in (first_http, second_http)
            ]
            eventually(lambda: inserts_waiting(stack) >= 2, what="both requests waiting to record")
            holder.rollback()
            first, second = (answer.result(timeout=30) for answer in answers)

    assert first.status_code == second.status_code == 200
    assert first.headers["Command-Id"] == second.headers["Command-Id"]
    assert stack.command(first.headers["Command-Id"]).attempts == 1


def inserts_waiting(stack: Stack) -> int:
    with get_engine(stack.database_url).connect() as connection:
        waiting = connection.scalar(
            text(
                "SELECT count(*) FROM pg_locks "
                "WHERE relation = 'commands'::regclass AND NOT granted"
            )
        )
    return int(waiting or 0)


def test_an_idempotency_key_reused_for_another_request_is_422(stack: Stack) -> None:
    key = uuid.uuid4().hex
    with stack.http() as http:
        enable(http, disabled_user(stack), headers={"Idempotency-Key": key})
        other = enable(http, disabled_user(stack), headers={"Idempotency-Key": key})
    assert other.status_code == 422
    assert other.json()["details"][0]["reason"] == "IDEMPOTENCY_KEY_REUSED"


def test_idempotency_keys_are_scoped_to_their_client(stack: Stack) -> None:
    key = uuid.uuid4().hex
    other_client = stack.new_client("other")
    with stack.http() as mine, stack.http(other_client) as theirs:
        a = enable(mine, disabled_user(stack), headers={"Idempotency-Key": key})
        b = enable(theirs, disabled_user(stack), headers={"Idempotency-Key": key})
    assert a.status_code == b.status_code == 200
    assert a.headers["Command-Id"] != b.headers["Command-Id"]


def test_a_client_sees_only_its_own_commands(stack: Stack) -> None:
    other_client = stack.new_client("nosy")
    with stack.http() as mine, stack.http(other_client) as theirs:
        command_id = enable(mine, disabled_user(stack)).headers["Command-Id"]
        assert mine.get(f"/v1beta1/commands/{command_id}").status_code == 200
        response = theirs.get(f"/v1beta1/commands/{command_id}")
    assert response.status_code == 404
    assert response.json()["code"] == 5


def test_readiness_reports_database_redis_and_worker(stack: Stack) -> None:
    assert httpx.get(f"{stack.api_url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{stack.api_url}/readyz").status_code == 200


def test_unknown_routes_answer_in_the_spec_error_body(stack: Stack) -> None:
    with stack.http() as http:
        response = http.get("/v1beta1/nothing-here")
    assert response.status_code == 404
    assert set(response.json()) == {"code", "message", "details"}


def test_a_lock_timeout_is_retried_with_backoff_until_the_command_succeeds(stack: Stack) -> None:
    user_id = disabled_user(stack)
    celery = create_celery_app(Settings(redis_url=stack.redis_url))
    control = celery.control
    # The worker takes nothing from the users queue until the lock is held, so the command
    # cannot run (and succeed) in between; and it is accepted before the lock is taken, as
    # on SQLite the lock also blocks the API's own writes.
    workers = [name for reply in control.ping(timeout=1.0) or [] for name in reply]

    def consume_users(consume: bool) -> None:
        """Stop or resume the worker's consumption of the users queue, once it confirms."""
        change = control.add_consumer if consume else control.cancel_consumer
        change("users", destination=workers, reply=True, limit=len(workers), timeout=10)

    consume_users(False)
    try:
        with stack.http() as http:
            accepted = enable(http, user_id, headers={"Prefer": "respond-async"})
        command_id = accepted.json()["command_id"]
        with user_row_locked(stack, user_id):
            consume_users(True)
            # A retry shows as the task's RETRY state (SQLite: the lock also keeps the command
            # log from recording it) or in the command log (PostgreSQL: only the user's row
            # is locked).
            eventually(
                lambda: (
                    celery.AsyncResult(command_id).state == "RETRY"
                    or stack.command(command_id).retries
                ),
                30,
                "a retry",
                interval=0.01,
            )
    finally:
        consume_users(True)
        celery.close()
    record = stack.finished(command_id, timeout=30)
    assert record.status.value == "succeeded", (record.error, record.retries)
    assert user_state(stack.sessions, user_id) == "enabled"
