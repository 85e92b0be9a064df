"""Benchmarks: ``python3 -m worker.dev bench`` (tests/benchmarks/run.py). Not tests."""
