"""Running the system: the command log as the outbox, beat's sweeps (stalled commands, due
work, failover, retention), the operator's actions and the stories they read."""
