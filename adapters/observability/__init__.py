"""What operators watch: the log lines, the Prometheus metrics and the Celery signals that
record them, beat's gauges, and its sweeps kept out of sight."""
