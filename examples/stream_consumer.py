"""Reading billing-worker's events from the Redis stream, in a consumer group.

REDIS_URL=redis://:PASSWORD@127.0.0.1:PORT/0 python examples/stream_consumer.py

BLOCK_SECONDS (default 5) is how long one read waits for an event; the socket waits longer,
so a quiet stream, however long, is only a series of empty reads.
"""

import contextlib
import json
import os

import redis

block_seconds = float(os.environ.get("BLOCK_SECONDS", "5"))
# redis-py gives up on a socket after 5 s by default: a read blocking as long would fail.
client = redis.Redis.from_url(os.environ["REDIS_URL"], socket_timeout=block_seconds + 5)
with contextlib.suppress(redis.ResponseError):  # the group exists: go on where it left off
    client.xgroup_create("billing:events", "my-service", id="0", mkstream=True)
while True:
    answer = client.xreadgroup(
        "my-service", "consumer-1", {"billing:events": ">"}, block=int(block_seconds * 1000)
    )
    for _stream, entries in answer or []:
        for entry_id, fields in entries:
            event = json.loads(fields[b"event"])
            print(event["type"], event["subject"]["id"], flush=True)
            client.xack("billing:events", "my-service", entry_id)
