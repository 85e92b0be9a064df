"""The API's routes, one router per resource (spec section 4, commands and health)."""

OPENAPI_TAGS = [
    {"name": "users", "description": "Enable a user (spec 4.3)."},
    {
        "name": "billing accounts",
        "description": "Create an organization's billing account and register it with Stripe "
        "(spec 4.1, 4.2).",
    },
    {"name": "subscriptions", "description": "Change a subscription's plan, or preview it."},
    {"name": "commands", "description": "A command's record: its status, result or error."},
    {"name": "webhooks", "description": "Endpoints that receive our events, signed."},
    {
        "name": "operations",
        "description": "For operators: stories, failed and rejected commands, replays.",
    },
    {"name": "stripe events", "description": "Where Stripe delivers its events to us."},
]
"""The OpenAPI document's groups, one per resource, in the order the docs page shows them
(each router is tagged with its resource's name)."""
