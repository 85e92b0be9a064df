"""The message contract as documents: the JSON Schema of every command and event, and the
AsyncAPI document of the queues, the stream and the webhooks (written under ``schemas/``)."""
