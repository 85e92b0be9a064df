"""Where Stripe and our database disagree: the drift report, and the adoption of what can be
linked safely."""
