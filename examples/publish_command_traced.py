"""A publisher of another service whose trace goes on in billing-worker's worker: the W3C
``traceparent`` of its current span travels in the message's headers (docs/how-to/tracing.md).
Run by tests/e2e/test_tracing.py against a traced worker and a real OTLP receiver."""

import os
import sys
import uuid

from celery import Celery

app = Celery(broker=os.environ["REDIS_URL"])

user_id = sys.argv[1]
# The current span's context, as OpenTelemetry writes it: `propagate.inject(headers)` in a
# service that traces, or "00-<32 hex trace id>-<16 hex span id>-01" written by hand.
traceparent = sys.argv[2]
command_id = str(uuid.uuid4())
app.send_task(
    "users.enable",
    queue="users",
    kwargs={"command_id": command_id, "user_id": user_id},
    headers={"traceparent": traceparent},  # the worker's run is a child of this span
)
print(command_id)
