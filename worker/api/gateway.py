"""Accepting a command over HTTP: validate → record (outbox) → publish → wait for the outcome.

The command log row is written before the message is published, so a command the API
acknowledged is never lost: if the publish fails, beat's stalled-command sweep publishes it
(``application.handlers.operations.outbox.accept``). The log is reached through its port
(``domain.ports.commands.CommandIntake``): a request that loses the race for its idempotency
key is told so by ``DuplicateCommand``, and answered with the command that won.
The wait listens on the Celery result channel of the command (Redis pub/sub) and reads the
outcome from the command log, the single source of truth.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from anyio import to_thread
from celery import Celery
from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from application.handlers.operations import outbox
from domain.errors import (
    BAD_REQUEST,
    ERROR_INFO,
    CommandError,
    ErrorCode,
    ErrorDetail,
    error_info,
    violations_of,
)
from domain.messages import Command, CommandStatus
from domain.ports.commands import CommandIntake, CommandPublisher, DuplicateCommand, LoggedCommand
from worker.api.client_share import ClientShare
from worker.api.errors import HTTP_STATUS, ApiError
from worker.api.organizations import KnownOrganizations
from worker.api.results import ResultListener, Watch

_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
Render = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class CommandGateway:
    commands: CommandIntake
    celery: Celery
    publisher: CommandPublisher
    results: ResultListener
    wait_timeout: float
    known_organizations: KnownOrganizations | None = None
    """The organizations a new command may name (``None``: any, the handler decides)."""
    client_share: ClientShare | None = None
    """Each client's rate of new commands (``None``: no limit)."""
    is_transient: Callable[[BaseException], bool] = lambda _error: False
    """Whether an error says the database is busy or unreachable for now. A command already
    recorded is then answered as it last stood (202) when the wait ends, never with a 503
    that the caller would retry into a second command."""

    async def submit(
        self,
        request: Request,
        client_id: str,
        command_type: type[Command],
        fields: Mapping[str, Any],
        render: Render,
        *,
        field_names: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        violations: Sequence[tuple[str, str]] = (),
    ) -> Response:
        """Run ``command_type`` with ``fields`` for ``client_id`` and answer for it.

        ``field_names`` gives the request's name for each command field this route renames;
        errors (the command's validation, and the finished command's own) are answered
        with the request's names. ``violations`` are what the route found wrong before the
        command (its unknown fields): with any, the request is a 400 listing them and every
        violation of the command's own validation at once."""
        if violations:
            raise _every_violation(command_type, fields, field_names or {}, violations)
        key = request.headers.get("idempotency-key")
        if key is not None and not _IDEMPOTENCY_KEY.fullmatch(key):
            raise ApiError.bad_request(
                "invalid Idempotency-Key",
                [("Idempotency-Key", "1 to 255 printable ASCII characters")],
            )
        fingerprint = _fingerprint(command_type.TASK_NAME, fields)

        waits = not _prefers_async(request)
        record = await self._existing(client_id, key, fingerprint) if key else None
        if record is None:
            command_id = str(uuid.uuid4())
            try:
                command = command_type.model_validate({**fields, "command_id": command_id})
            except ValidationError as error:
                raise _bad_request(error, field_names or {}) from None
            org_id: str | None = getattr(command, "org_id", None)
            # A new command: of an organization that exists (a made-up id is refused before
            # it is recorded or counted, so it cannot multiply the share), then within the
            # client's share.
            if org_id is not None and self.known_organizations is not None:
                await self.known_organizations.check(client_id, org_id)
            if self.client_share is not None:
                await self.client_share.take(client_id, org_id)

            def accept_and_publish() -> LoggedCommand:
                # One trip to a worker thread: record (the outbox), then publish at once.
                return self.accept(
                    command,
                    client_id=client_id,
                    idempotency_key=key,
                    request_fingerprint=fingerprint,
                )

            try:
                if waits:
                    record = await self.accept_and_wait(
                        command_id, accept_and_publish, self.wait_timeout
                    )
                else:
                    record = await to_thread.run_sync(accept_and_publish)
            except DuplicateCommand:
                # Another request with the same key won the race: answer with its command.
                record = await self._existing(client_id, key, fingerprint) if key else None
                if record is None:
                    raise
                if waits:
                    record = await self.wait(record.id, self.wait_timeout)
            except Exception as error:
                if self.is_transient(error):
                    self._publish_if_recorded_unheard(command_id)
                raise
        elif waits:
            record = await self.wait(record.id, self.wait_timeout)
        return respond(record, render, headers, field_names=field_names, respond_async=not waits)

    def _publish_if_recorded_unheard(self, command_id: str) -> None:
        """The record's commit may have gone through unanswered: look, in the background
        (the request answers 503 at once), and publish the command if it was recorded."""
        threading.Thread(
            target=outbox.publish_if_recorded_unheard,
            args=(command_id, self.commands.get, self.publisher),
            kwargs={"is_transient": self.is_transient},
            name=f"in-doubt-{command_id}",
            daemon=True,
        ).start()

    async def _existing(self, client_id: str, key: str, fingerprint: str) -> LoggedCommand | None:
        record = await to_thread.run_sync(self.commands.find_by_idempotency_key, client_id, key)
        if record is not None and record.request_fingerprint != fingerprint:
            raise ApiError(
                ErrorCode.INVALID_ARGUMENT,
                "this Idempotency-Key was used with a different request",
                details=[error_info("IDEMPOTENCY_KEY_REUSED", command_id=record.id)],
                status=422,
            )
        return record

    def accept(
        self,
        command: Command,
        *,
        client_id: str | None,
        idempotency_key: str | None = None,
        request_fingerprint: str | None = None,
    ) -> LoggedCommand:
        """Record ``command`` and publish it at once
        (``application.handlers.operations.outbox.accept``: a publish that fails is left to the
        stalled-command sweep). Raises :class:`DuplicateCommand` when its id or the client's key
        is taken. Blocking: call it from a worker thread."""
        return outbox.accept(
            command,
            self.commands,
            self.publisher,
            client_id=client_id,
            idempotency_key=idempotency_key,
            request_fingerprint=request_fingerprint,
        )

    async def accept_and_wait(
        self, command_id: str, accept: Callable[[], LoggedCommand], timeout: float
    ) -> LoggedCommand:
        """Run ``accept`` (record and publish the command ``command_id``) and wait for the
        command to finish, watching for its end from before it is published (so that its
        end cannot come unheard); the record as it stands when ``timeout`` ends, if it has
        not finished."""
        deadline = asyncio.get_running_loop().time() + timeout
        with self.results.watching(command_id) as watch:
            record = await to_thread.run_sync(accept)
            return await self._until_finished(record, watch, deadline)

    async def wait(self, command_id: str, timeout: float) -> LoggedCommand:
        """The command's record once it finished, or as it stands when ``timeout`` ends."""
        deadline = asyncio.get_running_loop().time() + timeout
        with self.results.watching(command_id) as watch:
            record = await to_thread.run_sync(self.commands.get, command_id)
            assert record is not None
            return await self._until_finished(record, watch, deadline)

    async def _until_finished(
        self, record: LoggedCommand, watch: Watch, deadline: float
    ) -> LoggedCommand:
        """Read the log whenever the command's task reports an end, and at least every
        second (a safety net should a message be missed), until it ended or ``deadline``."""
        loop = asyncio.get_running_loop()
        while not record.status.is_terminal:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return record
            await watch.next_look(min(remaining, 1.0))
            try:
                found = await to_thread.run_sync(self.commands.get, record.id)
            except Exception as error:
                if not self.is_transient(error):
                    raise
                continue  # the command is recorded: look again, until the deadline
            assert found is not None
            record = found
        return record


ENDED_IN_ERROR = (CommandStatus.FAILED, CommandStatus.REJECTED)


def respond(
    record: LoggedCommand,
    render: Render,
    headers: Mapping[str, str] | None = None,
    *,
    field_names: Mapping[str, str] | None = None,
    respond_async: bool = False,
) -> Response:
    """200 with the rendered result, the recorded error, or 202 while still in flight.

    A 202 says ``Preference-Applied: respond-async`` only when the client asked for it
    (``respond_async``): a synchronous wait that ran out is not a preference applied (RFC
    7240 §3).

    The command's error names the command's fields (what a queue publisher sends); the
    answer names the request's, renamed here by ``field_names`` (command field → request
    field), the one place where the two vocabularies meet."""
    common = {"Command-Id": record.id, **(headers or {})}
    if record.status is CommandStatus.SUCCEEDED:
        return JSONResponse(render(record.result or {}), status_code=200, headers=common)
    # Rejected (the caller's mistake) or failed (an operator's): answered alike, with the
    # recorded error body and its code's HTTP status.
    if record.status in ENDED_IN_ERROR and record.error is not None:
        error = CommandError.from_body(record.error)
        body = {**error.to_body(), "details": in_request_terms(error.details, field_names or {})}
        return JSONResponse(body, status_code=HTTP_STATUS[error.code], headers=common)
    accepted = {**common, "Location": f"/v1beta1/commands/{record.id}"}
    if respond_async:
        accepted["Preference-Applied"] = "respond-async"
    return JSONResponse(
        {"command_id": record.id, "status": record.status.value},
        status_code=202,
        headers=accepted,
    )


def _prefers_async(request: Request) -> bool:
    prefer = ",".join(request.headers.getlist("prefer")).lower()
    return any(p.strip().split(";")[0].strip() == "respond-async" for p in prefer.split(","))


def _fingerprint(command_type: str, fields: Mapping[str, Any]) -> str:
    canonical = json.dumps(
        {"type": command_type, "fields": fields}, sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _every_violation(
    command_type: type[Command],
    fields: Mapping[str, Any],
    field_names: Mapping[str, str],
    found: Sequence[tuple[str, str]],
) -> ApiError:
    """The 400 for a request the route already found wrong: its violations, then those of
    the command's validation on a field the route did not name already."""
    violations = list(found)
    try:
        command_type.model_validate({**fields, "command_id": str(uuid.uuid4())})
    except ValidationError as error:
        named = {field for field, _ in found}
        violations += [
            (field, why)
            for field, why in violations_of(error.errors(include_url=False), field_names)
            if field not in named
        ]
    return ApiError.bad_request("the request is invalid", violations)


def _bad_request(error: ValidationError, field_names: Mapping[str, str]) -> ApiError:
    violations = violations_of(error.errors(include_url=False), field_names)
    return ApiError.bad_request("the request is invalid", violations)


_LEADING_NAME = re.compile(r"^([^.\[]+)(.*)$", re.DOTALL)


def request_field(command_field: str, field_names: Mapping[str, str]) -> str:
    """``account.tax_data[0].id`` → ``body.tax_data[0].id``: a command's field path with its
    first part renamed to the request's name for it."""
    match = _LEADING_NAME.match(command_field)
    if match is None:
        return command_field
    head, rest = match.groups()
    return field_names.get(head, head) + rest


def in_request_terms(
    details: Sequence[ErrorDetail], field_names: Mapping[str, str]
) -> list[ErrorDetail]:
    """Error details of a command with the fields they name renamed to the request's names:
    the ``field`` of each BadRequest violation, and an ErrorInfo's ``field`` metadata."""
    if not field_names:
        return list(details)
    renamed: list[ErrorDetail] = []
    for detail in details:
        if detail.get("@type") == BAD_REQUEST:
            detail = {
                **detail,
                "fieldViolations": [
                    {**violation, "field": request_field(str(violation["field"]), field_names)}
                    if "field" in violation
                    else violation
                    for violation in detail.get("fieldViolations", [])
                ],
            }
        elif detail.get("@type") == ERROR_INFO and "field" in detail.get("metadata", {}):
            metadata = detail["metadata"]
            detail = {
                **detail,
                "metadata": {**metadata, "field": request_field(metadata["field"], field_names)},
            }
        renamed.append(detail)
    return renamed


def record_view(record: LoggedCommand) -> dict[str, Any]:
    """``GET /v1beta1/commands/{id}``."""
    view: dict[str, Any] = {
        "command_id": record.id,
        "type": record.type,
        "status": record.status.value,
        "attempts": record.attempts,
        "created_at": record.created_at.isoformat(),
        "updated_at": record.updated_at.isoformat(),
        "finished_at": record.finished_at.isoformat() if record.finished_at else None,
    }
    if record.result is not None:
        view["result"] = record.result
    if record.error is not None:
        view["error"] = record.error
    if record.retries:
        view["retries"] = record.retries
    return view
