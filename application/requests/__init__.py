"""Requests only the use cases take: what beat's sweeps and an operator ask, as frozen messages."""
