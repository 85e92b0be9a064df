"""One small handler per command: load, decide (domain), persist, call the provider, record."""
