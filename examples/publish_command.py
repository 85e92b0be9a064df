"""Publishing a command to billing-worker from another service: a plain Celery client, nothing
of billing-worker imported (`pip install "celery[redis]"`).

REDIS_URL=redis://:PASSWORD@127.0.0.1:PORT/0 python examples/publish_command.py usr_demo
"""

import os
import sys
import uuid

from celery import Celery

# The Redis of billing-worker, with its password: `up` writes the whole URL into
# <data_dir>/stack.json ("redis_url"); docker-compose's Redis takes BILLING_REDIS_PASSWORD.
app = Celery(broker=os.environ["REDIS_URL"])

user_id = sys.argv[1]
command_id = str(uuid.uuid4())  # the idempotency key: a command published twice runs once
app.send_task(
    "users.enable",
    queue="users",  # name the queue: without it the task lands on Celery's default queue
    kwargs={"command_id": command_id, "user_id": user_id},
)
print(command_id)
