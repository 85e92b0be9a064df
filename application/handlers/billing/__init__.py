"""Billing accounts and their organizations: registering an account with the provider (and
beat's redrive of those left pending), creating organizations."""
