"""Commands on the queues: the queues and the Celery configuration every process shares, the
guarded broker, the publisher, the dead letters, the masking of what Celery shows."""
