"""Subscriptions and their plans: the billing periods, and the plan changes (immediate, at the
period's end, previewed)."""
