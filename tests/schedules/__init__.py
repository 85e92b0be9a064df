"""Seeded fault schedules over the real stack (issue 43): ``python3 -m worker.dev chaos``."""
