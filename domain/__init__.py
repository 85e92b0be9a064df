"""The pure core of billing-worker: commands, results, entities, rules, error codes and ports.

Nothing here imports Celery, SQLAlchemy, Stripe or FastAPI; adapters in ``worker/`` implement
the ports and ``tasks/`` wires commands to handlers.
"""
