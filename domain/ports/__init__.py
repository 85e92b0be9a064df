"""Ports, as Protocols: the repositories and the unit of work, the provider, the command log and
publishing, the outbox and webhooks, the API clients' verifier, and the application a task runs
with."""
