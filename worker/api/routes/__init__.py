"""The API's routes, one router per resource (spec section 4, commands and health)."""
