"""A subscription's page: phases, plan changes and their lag, invoices read from Stripe."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
