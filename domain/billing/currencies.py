"""The currencies Stripe accepts, and their amounts in minor units.

From Stripe's "Supported currencies" page (https://docs.stripe.com/currencies), as published in
September 2026:

* the *presentment* currencies, those a price or a charge can be in: the union of the lists
  the page gives per account country (a currency missing there, such as an ISO 4217 test,
  fund or precious-metal code like ``xts``, ``xau`` or ``xxx``, is refused by Stripe);
* every API amount is an integer in the currency's *minor unit*: cents for a two-decimal
  currency (``1000`` is 10.00 USD);
* the zero-decimal currencies take whole units (``500`` is 500 JPY);
* the three-decimal currencies take thousandths, whose last digit must be 0 ("round amounts
  to the nearest ten": ``5120`` is 5.120 KWD, ``5124`` is refused).

Stripe writes codes in lower case, and so do we; any case is accepted on the way in.
"""

from __future__ import annotations

from pydantic_core import PydanticCustomError

__all__ = [
    "STRIPE_CURRENCIES",
    "THREE_DECIMAL_CURRENCIES",
    "ZERO_DECIMAL_CURRENCIES",
    "amount_refusal",
    "currency_code",
    "decimals",
    "format_amount",
    "minimum_charge",
]


def _codes(text: str) -> frozenset[str]:
    return frozenset(text.split())


STRIPE_CURRENCIES = _codes(
    """
    aed afn all amd ang aoa ars aud awg azn bam bbd bdt bhd bif bmd bnd bob brl bsd bwp byn
    bzd cad cdf chf clp cny cop crc cve czk djf dkk dop dzd egp etb eur fjd fkp gbp gel gip
    gmd gnf gtq gyd hkd hnl htg huf idr ils inr isk jmd jod jpy kes kgs khr kmf krw kwd kyd
    kzt lak lbp lkr lrd lsl mad mdl mga mkd mmk mnt mop mur mvr mwk mxn myr mzn nad ngn nio
    nok npr nzd omr pab pen pgk php pkr pln pyg qar ron rsd rub rwf sar sbd scr sek sgd shp
    sle sos srd std szl thb tjs tnd top try ttd twd tzs uah ugx usd uyu uzs vnd vuv wst xaf
    xcd xcg xof xpf yer zar zmw
    """
)
"""Stripe's presentment currencies, in lower case."""

ZERO_DECIMAL_CURRENCIES = _codes("bif clp djf gnf jpy kmf krw mga pyg rwf ugx vnd vuv xaf xof xpf")
"""Amounts in whole units: ``500`` is 500 JPY."""

THREE_DECIMAL_CURRENCIES = _codes("bhd jod kwd omr tnd")
"""Amounts in thousandths, a multiple of 10: ``1230`` is 1.230 KWD."""

THREE_DECIMAL_STEP = 10
"""Stripe takes a three-decimal amount only when it is a multiple of this."""


STRIPE_MINIMUM_CHARGES = {
    "usd": 50, "aed": 200, "aud": 50, "bgn": 100, "brl": 50, "cad": 50, "chf": 50, "czk": 1500,
    "dkk": 250, "eur": 50, "gbp": 30, "hkd": 400, "huf": 17500, "inr": 50, "jpy": 50,
    "mxn": 1000, "myr": 200, "nok": 300, "nzd": 50, "pln": 200, "ron": 200, "sek": 300,
    "sgd": 50, "thb": 1000,
}  # fmt: skip
"""The least amount Stripe charges, per currency, in minor units ("Minimum and maximum charge
amounts" on the same page). An invoice whose amount due is smaller is not charged: Stripe marks
it paid and carries the amount to the customer's balance, which the next invoice adds. In any
other currency the minimum is the equivalent of 0.50 USD in the account's settlement currency
at the day's rate, which is not known here."""


def minimum_charge(currency: str) -> int | None:
    """Stripe's minimum charge in ``currency``, in minor units; ``None`` where it follows the
    day's exchange rate (see :data:`STRIPE_MINIMUM_CHARGES`)."""
    return STRIPE_MINIMUM_CHARGES.get(currency.lower())


def currency_code(value: str) -> str:
    """``value`` as Stripe writes it (``EUR`` → ``eur``) if Stripe accepts it, else a
    validation error (the field it was given for is named by pydantic)."""
    code = value.strip().lower()
    if code not in STRIPE_CURRENCIES:
        raise PydanticCustomError(
            "currency",
            "must be an ISO 4217 currency code that Stripe accepts, such as usd or EUR",
        )
    return code


def decimals(currency: str) -> int:
    """How many digits of an amount in ``currency`` come after the decimal point: 0 for a
    zero-decimal currency, 3 for a three-decimal one, else 2."""
    code = currency.lower()
    if code in ZERO_DECIMAL_CURRENCIES:
        return 0
    if code in THREE_DECIMAL_CURRENCIES:
        return 3
    return 2


def amount_refusal(amount: int, currency: str) -> str | None:
    """Why Stripe would refuse ``amount`` minor units of ``currency``, or ``None``."""
    if currency.lower() in THREE_DECIMAL_CURRENCIES and amount % THREE_DECIMAL_STEP:
        return (
            f"must be a multiple of {THREE_DECIMAL_STEP} in {currency.upper()}: Stripe takes "
            "thousandths whose last digit is 0"
        )
    return None


def format_amount(amount: int, currency: str) -> str:
    """``amount`` minor units as people read them, in the currency's own decimals, thousands
    grouped: ``4900, "usd"`` → ``49.00 USD``, ``500, "jpy"`` → ``500 JPY``, ``1230, "kwd"`` →
    ``1.230 KWD``, ``123456789, "usd"`` → ``1,234,567.89 USD``. The one way money is shown to
    a person: the CLI, the console and the domain's own messages."""
    places = decimals(currency)
    sign = "-" if amount < 0 else ""
    whole, fraction = divmod(abs(amount), 10**places)
    shown = f"{whole:,}.{fraction:0{places}d}" if places else f"{whole:,}"
    return f"{sign}{shown} {currency.upper()}"
