"""Plans, subscriptions and their plan changes: subscribing, requesting a change or its
preview, applying it at the provider, withdrawing a staged one, and beat's side of changes
that fell due."""
