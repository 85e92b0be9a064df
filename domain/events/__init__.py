"""Domain events: the envelope (``base``), one module per aggregate's events, and the catalog that
knows them all by name."""
