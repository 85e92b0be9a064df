"""Organizations and billing accounts: search, lists, and an account's page."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
