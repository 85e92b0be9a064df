"""The billing provider's adapter: Stripe (the one wing that imports ``stripe``), its objects and
events read into our values, and the rate budget every process shares in Redis."""
