"""The emulated Stripe resources, one module per family, each exporting ``ROUTES``."""
