"""Stripe's presentment currencies and their minor units (https://docs.stripe.com/currencies).

The emulator keeps its own copy of the list: a ``currency`` Stripe does not accept (``xts``,
``xau``, ``xxx`` or any code outside the list) is a 400 ``invalid_request_error`` naming
``currency``. Amounts are always in the currency's minor unit:

* zero-decimal currencies (``jpy``, ``krw``...) count whole units: ``500`` is 500 JPY;
* three-decimal currencies (``bhd``, ``jod``, ``kwd``, ``omr``, ``tnd``) count thousandths,
  and Stripe requires the last digit to be 0 (amounts rounded to the nearest ten), so an
  amount not divisible by 10 is refused;
* every other currency has two decimals.
"""

from __future__ import annotations

from typing import Final

from stripe_emulator.errors import StripeError, invalid


def _codes(text: str) -> frozenset[str]:
    return frozenset(text.split())


SUPPORTED: Final = _codes(
    """
    aed afn all amd ang aoa ars aud awg azn bam bbd bdt bgn bhd bif bmd bnd bob brl bsd bwp
    byn bzd cad cdf chf clp cny cop crc cve czk djf dkk dop dzd egp etb eur fjd fkp gbp gel
    gip gmd gnf gtq gyd hkd hnl htg huf idr ils inr isk jmd jod jpy kes kgs khr kmf krw kwd
    kyd kzt lak lbp lkr lrd lsl mad mdl mga mkd mmk mnt mop mur mvr mwk mxn myr mzn nad ngn
    nio nok npr nzd omr pab pen pgk php pkr pln pyg qar ron rsd rub rwf sar sbd scr sek sgd
    shp sle sos srd std szl thb tjs tnd top try ttd twd tzs uah ugx usd uyu uzs vnd vuv wst
    xaf xcd xcg xof xpf yer zar zmw
    """
)
ZERO_DECIMAL: Final = _codes("bif clp djf gnf jpy kmf krw mga pyg rwf ugx vnd vuv xaf xof xpf")
THREE_DECIMAL: Final = _codes("bhd jod kwd omr tnd")

MINIMUM_CHARGES: Final = {
    "usd": 50, "aed": 200, "aud": 50, "bgn": 100, "brl": 50, "cad": 50, "chf": 50, "czk": 1500,
    "dkk": 250, "eur": 50, "gbp": 30, "hkd": 400, "huf": 17500, "inr": 50, "jpy": 50,
    "mxn": 1000, "myr": 200, "nok": 300, "nzd": 50, "pln": 200, "ron": 200, "sek": 300,
    "sgd": 50, "thb": 1000,
}  # fmt: skip
"""Stripe's minimum charge per currency, in minor units ("Minimum and maximum charge amounts",
https://docs.stripe.com/currencies#minimum-and-maximum-charge-amounts). For any other
currency Stripe's minimum is the equivalent of 0.50 USD in the account's settlement currency
at the day's rate, which the emulator cannot know: it charges any amount there."""

_SYMBOLS: Final = {"usd": "$", "eur": "€", "gbp": "£", "jpy": "¥", "inr": "₹", "krw": "₩"}


def check(value: str, param: str = "currency") -> str:
    """``value`` lowercased if Stripe accepts it as a currency, else Stripe's 400."""
    currency = value.lower()
    if currency not in SUPPORTED:
        raise invalid(
            f"Invalid currency: {value}. Stripe currently supports these currencies: "
            + ", ".join(sorted(SUPPORTED)),
            param,
        )
    return currency


def check_amount(currency: str, amount: int, param: str) -> None:
    """Refuse a three-decimal amount whose last digit is not 0, as Stripe does."""
    if currency in THREE_DECIMAL and amount % 10:
        raise amount_not_rounded(currency, amount, param)


def amount_not_rounded(currency: str, amount: int, param: str) -> StripeError:
    return invalid(
        f"Invalid {param}: {currency.upper()} is a three-decimal currency and amounts must be "
        f"rounded to the nearest ten (the last digit must be 0); got {amount}.",
        param,
    )


def minimum_charge(currency: str) -> int:
    """The least amount of ``currency`` Stripe charges a card (0: any, see
    :data:`MINIMUM_CHARGES`)."""
    return MINIMUM_CHARGES.get(currency, 0)


def exponent(currency: str) -> int:
    if currency in ZERO_DECIMAL:
        return 0
    if currency in THREE_DECIMAL:
        return 3
    return 2


def format_amount(currency: str, amount: int) -> str:
    """``$12.00``, ``¥500``, ``KWD 1.250``: how invoice line descriptions show a price."""
    digits = exponent(currency)
    sign = "-" if amount < 0 else ""
    units = abs(amount)
    text = str(units) if digits == 0 else f"{units // 10**digits}.{units % 10**digits:0{digits}d}"
    symbol = _SYMBOLS.get(currency)
    if symbol is None:
        return f"{sign}{currency.upper()} {text}"
    return f"{sign}{symbol}{text}"
