"""The use cases, in packages by the domain's families (``billing``, ``subscriptions``,
``events``, ``drift``, ``provider``, ``operations``; ``users`` alone, as in the domain): a
small handler per command, operator action or sweep: load, decide (in the domain), persist,
call the provider, record."""
