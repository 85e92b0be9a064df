"""Publishing a command to billing-worker from another service when its Redis runs under
Sentinel: the same plain Celery client, given the sentinels instead of one Redis address, so
that it follows the primary through a failover.

REDIS_SENTINELS=10.0.0.1:26379,10.0.0.2:26379 REDIS_MASTER_NAME=mymaster \
REDIS_PASSWORD=… REDIS_SENTINEL_PASSWORD=… python examples/publish_command_sentinel.py usr_demo
"""

import os
import sys
import uuid
from urllib.parse import quote

from celery import Celery

# billing-worker's BILLING_REDIS_SENTINELS, BILLING_REDIS_MASTER_NAME, BILLING_REDIS_PASSWORD
# (the primary's) and BILLING_REDIS_SENTINEL_PASSWORD (the sentinels' own, if any).
sentinels = os.environ["REDIS_SENTINELS"].split(",")
password = quote(os.environ.get("REDIS_PASSWORD", ""), safe="")
# One sentinel:// URL per sentinel, joined by ";" (no trailing ";"); /0 is BILLING_REDIS_DB.
app = Celery(broker=";".join(f"sentinel://:{password}@{sentinel}/0" for sentinel in sentinels))
app.conf.broker_transport_options = {
    "master_name": os.environ.get("REDIS_MASTER_NAME", "mymaster"),
    "sentinel_kwargs": {"password": os.environ.get("REDIS_SENTINEL_PASSWORD")},
    # Required for a failover: without it a publish can wait forever on a dead primary.
    "socket_timeout": 5,
    "socket_connect_timeout": 5,
}

user_id = sys.argv[1]
command_id = str(uuid.uuid4())  # the idempotency key: a command published twice runs once
app.send_task(
    "users.enable",
    queue="users",
    kwargs={"command_id": command_id, "user_id": user_id},
)
print(command_id)
