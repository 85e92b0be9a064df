"""What happened, told to the rest of the platform: the outbox's relay onto the Redis stream,
and the webhook endpoints with their signed deliveries."""
