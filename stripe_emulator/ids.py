"""Object ids with Stripe's prefixes and lengths (``cus_`` + 14, ``price_`` + 24, ...)."""

from __future__ import annotations

import random
import string
from typing import Final

_ALPHABET: Final = string.ascii_letters + string.digits
# Random bytes -> alphabet characters in one C call (byte % 62: a slight bias, harmless here).
_TABLE: Final = bytes(ord(_ALPHABET[byte % len(_ALPHABET)]) for byte in range(256))
# Ids need to be unique, not unpredictable: a fast PRNG seeded from the OS is enough, and it is
# independent of the seeded RNG that drives fault injection (so seeding faults is reproducible).
_rng = random.Random()  # noqa: S311

LENGTHS: Final[dict[str, int]] = {
    "cus": 14,
    "txi": 24,
    "prod": 14,
    "price": 24,
    "sub": 24,
    "sub_sched": 24,
    "si": 14,
    "in": 24,
    "il": 24,
    "ii": 24,
    "il_tmp": 24,
    "upcoming_in": 24,
    "req": 14,
    "evt": 24,
    "we": 24,
    "di": 24,
    "cn": 24,
    "cnli": 24,
    "re": 24,
    "cbtxn": 24,
    "whsec": 32,
}


def new_id(prefix: str) -> str:
    """A fresh id such as ``cus_Q3x9...``."""
    return prefix + "_" + _rng.randbytes(LENGTHS[prefix]).translate(_TABLE).decode()


def coupon_id() -> str:
    """A generated coupon id: 8 letters and digits (Stripe's ``Z4OV52SU``)."""
    return _rng.randbytes(8).translate(_TABLE).decode()


def invoice_prefix() -> str:
    """A customer's ``invoice_prefix``: 8 uppercase hex characters, as Stripe generates."""
    return f"{_rng.getrandbits(32):08X}"
