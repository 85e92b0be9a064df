"""Stripe's truth flowing in: the events Stripe sends, coalesced into one read per object;
the sync that reads the object and brings our rows in line; our webhook endpoint at
Stripe."""
