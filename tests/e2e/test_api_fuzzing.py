"""Schemathesis fuzzes the running API against its own served document: every answer must
be no server error, have a documented status, content type, headers and schema.

Bounded in time (``FUZZ_SECONDS`` per database); every phase runs, the stateful one following
the document's links from a 202 to its command. A failure is fixed in the API or the
document, never by leaving a check out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from adapters.clock import SystemClock
from application.handlers.events import webhook_endpoints
from application.requests.operator_requests import DisableEndpoint, ListEndpoints
from domain.permissions import ALL_SCOPES, Grant
from tests.support.records import create_organization, services_on
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

FUZZ_SECONDS = int(os.environ.get("BILLING_FUZZ_SECONDS", "30"))
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
)


@pytest.mark.timeout(FUZZ_SECONDS + 120)
def test_schemathesis_finds_no_failure_against_the_served_document(
    stack: Stack, tmp_path: Path
) -> None:
    # An organization to find, so that generated requests also get past the 404.
    create_organization(stack.sessions, SystemClock(), name=f"fuzz-{uuid.uuid4().hex[:8]}")
    client = stack.new_client("fuzzer", grant=Grant(scopes=ALL_SCOPES))
    svc = services_on(stack.sessions)
    before = {endpoint.id for endpoint in webhook_endpoints.list_endpoints(ListEndpoints(), svc)}
    api_url = stack.api_url
    report = tmp_path / "report"
    command = [
        str(Path(sys.executable).parent / "st"),
        "run",
        f"{api_url}/openapi.json",
        f"--url={api_url}",
        f"--auth={client.client_id}:{client.secret}",
        f"--checks={','.join(CHECKS)}",
        "--phases=examples,coverage,fuzzing,stateful",
        f"--max-time={FUZZ_SECONDS}",
        "--workers=1",
        "--request-timeout=30",
        "--suppress-health-check=too_slow,filter_too_much",
        "--report=junit",
        f"--report-dir={report}",
        "--no-color",
    ]

    run = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=FUZZ_SECONDS + 90,
        check=False,
        cwd=tmp_path,  # its cache (.schemathesis/) stays out of the checkout
    )

    # The endpoints the fuzzer added (at made-up URLs) must not receive the events of the
    # tests that share this stack.
    for endpoint in webhook_endpoints.list_endpoints(ListEndpoints(), svc):
        if endpoint.id not in before and endpoint.is_enabled:
            webhook_endpoints.disable_endpoint(
                DisableEndpoint(endpoint.id, "added by the fuzzer"), svc
            )

    assert run.returncode == 0, run.stdout[-20_000:] + run.stderr[-5_000:]
