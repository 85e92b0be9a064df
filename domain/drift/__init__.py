"""Drift between Stripe and our database: the report, and its rules for customers, subscriptions
and renewals."""
