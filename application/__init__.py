"""The use cases: every business operation (a queued command, an operator's action, a beat sweep)
as one handler behind the unit of work."""
