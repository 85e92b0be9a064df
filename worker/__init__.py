"""The runnable system: in its wings the adapters of the domain's ports and the processes (the API,
the CLI, the local stack), and the one composition root, ``bootstrap.py``."""
