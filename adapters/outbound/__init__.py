"""Events out: the relay from the outbox onto the Redis stream, and the signed webhook
deliveries."""
