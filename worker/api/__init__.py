"""The HTTP ingress: validates, records and enqueues commands, then reports their outcome."""
