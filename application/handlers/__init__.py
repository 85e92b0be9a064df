"""The use cases, one module per family: a small handler per command, operator action or sweep:
load, decide (in the domain), persist, call the provider, record."""
