"""The billing provider seen from the domain: the record of each call, Stripe's truth flowing in,
and the shared rate budget."""
