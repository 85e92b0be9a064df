"""Tax ID types and value checks, as Stripe applies them when a tax ID is created.

The type list is Stripe's full enum, read from the ``stripe`` SDK's own parameter types
(``CustomerCreateParamsTaxIdDatum.type``), so it follows the API version the SDK speaks. Values
are checked against the format Stripe documents for the type
(https://docs.stripe.com/billing/customer/tax-ids): precisely for the common types, and with a
light sanity check (letters, digits and the separators Stripe's examples use) for the rest, so a
plausible value of a rarer type is accepted.
"""

from __future__ import annotations

import re
import typing
from typing import Final, Literal

from stripe.params import CustomerCreateParamsTaxIdDatum


def _sdk_tax_id_types() -> tuple[str, ...]:
    """The ``Literal`` inside the SDK's ``Literal[...] | str`` annotation of a tax ID's type."""
    annotation = typing.get_type_hints(CustomerCreateParamsTaxIdDatum)["type"]
    literal = next(arg for arg in typing.get_args(annotation) if typing.get_origin(arg) is Literal)
    return tuple(typing.get_args(literal))


TAX_ID_TYPES: Final[tuple[str, ...]] = _sdk_tax_id_types()

# EU VAT numbers: the member-state prefix (EL for Greece, XI for Northern Ireland) followed by
# that state's national format.
_EU_VAT: Final[dict[str, str]] = {
    "AT": r"U\d{8}",
    "BE": r"[01]\d{9}",
    "BG": r"\d{9,10}",
    "CY": r"\d{8}[A-Z]",
    "CZ": r"\d{8,10}",
    "DE": r"\d{9}",
    "DK": r"\d{8}",
    "EE": r"\d{9}",
    "EL": r"\d{9}",
    "ES": r"[A-Z0-9]\d{7}[A-Z0-9]",
    "FI": r"\d{8}",
    "FR": r"[A-HJ-NP-Z0-9]{2}\d{9}",
    "HR": r"\d{11}",
    "HU": r"\d{8}",
    "IE": r"\d{7}[A-W][A-IW]?|\d[A-Z+*]\d{5}[A-W]",
    "IT": r"\d{11}",
    "LT": r"\d{9}|\d{12}",
    "LU": r"\d{8}",
    "LV": r"\d{11}",
    "MT": r"\d{8}",
    "NL": r"\d{9}B\d{2}",
    "PL": r"\d{10}",
    "PT": r"\d{9}",
    "RO": r"\d{2,10}",
    "SE": r"\d{12}",
    "SI": r"\d{8}",
    "SK": r"\d{10}",
    "XI": r"\d{9}|\d{12}|GD\d{3}|HA\d{3}",
}
_EU_VAT_PATTERN: Final = re.compile(
    "|".join(f"{prefix}(?:{body})" for prefix, body in _EU_VAT.items()) + r"\Z"
)
_EU_VAT_COUNTRY: Final = {"EL": "GR", "XI": "GB"}

_PATTERNS: Final[dict[str, re.Pattern[str]]] = {
    name: re.compile(pattern + r"\Z")
    for name, pattern in {
        "gb_vat": r"GB(?:\d{9}|\d{12}|GD\d{3}|HA\d{3})",
        "us_ein": r"\d{2}-\d{7}",
        "in_gst": r"\d{2}[A-Z]{5}\d{4}[A-Z][1-9A-Z]Z[0-9A-Z]",
        "au_abn": r"\d{11}",
        "au_arn": r"\d{12}",
        "ca_bn": r"\d{9}",
        "ca_gst_hst": r"\d{9}RT\d{4}",
        "ca_qst": r"\d{10}TQ\d{4}",
        "ca_pst_bc": r"PST-\d{4}-\d{4}",
        "ca_pst_mb": r"\d{6}-\d",
        "ca_pst_sk": r"\d{7}",
        "eu_oss_vat": r"EU\d{9}",
        "no_vat": r"\d{9}MVA",
        "ch_vat": r"CHE-\d{3}\.\d{3}\.\d{3} (?:MWST|TVA|IVA)",
        "li_uid": r"CHE\d{9}",
        "jp_trn": r"T\d{13}",
        "jp_cn": r"\d{13}",
        "br_cpf": r"\d{3}\.\d{3}\.\d{3}-\d{2}",
        "br_cnpj": r"\d{2}\.\d{3}\.\d{3}/\d{4}-\d{2}",
        "kr_brn": r"\d{3}-\d{2}-\d{5}",
        "za_vat": r"4\d{9}",
        "sa_vat": r"\d{15}",
        "ae_trn": r"\d{15}",
        "nz_gst": r"\d{8,9}",
        "sg_uen": r"\d{8,9}[A-Z]",
        "sg_gst": r"[A-Z]\d{8}[A-Z]",
        "hk_br": r"\d{8}",
        "tw_vat": r"\d{8}",
        "th_vat": r"\d{13}",
        "ru_inn": r"\d{10}(?:\d{2})?",
        "ru_kpp": r"\d{9}",
        "mx_rfc": r"[A-Z&\u00d1]{3,4}\d{6}[A-Z0-9]{3}",
    }.items()
}

# Everything else: must contain a digit, and only the characters Stripe's examples use.
_GENERIC: Final = re.compile(r"(?=.*\d)[A-Za-z0-9][A-Za-z0-9 .\-/]{1,39}\Z")

# Types Stripe verifies against a government registry; their ``verification`` starts pending.
_VERIFIED_TYPES: Final = frozenset({"eu_vat", "gb_vat", "au_abn"})


def is_valid(tax_type: str, value: str) -> bool:
    """Whether ``value`` has the format Stripe accepts for ``tax_type``."""
    if tax_type == "eu_vat":
        return _EU_VAT_PATTERN.match(value) is not None
    pattern = _PATTERNS.get(tax_type)
    if pattern is not None:
        return pattern.match(value) is not None
    return _GENERIC.match(value) is not None


def country_of(tax_type: str, value: str) -> str | None:
    """The ``country`` Stripe reports for a tax ID."""
    if tax_type == "eu_vat":
        prefix = value[:2]
        return _EU_VAT_COUNTRY.get(prefix, prefix)
    if tax_type == "eu_oss_vat":
        return None
    return tax_type[:2].upper()


def verification_for(tax_type: str) -> dict[str, str | None] | None:
    """Stripe's initial ``verification`` hash (``None`` for types it does not verify)."""
    if tax_type not in _VERIFIED_TYPES:
        return None
    return {"status": "pending", "verified_address": None, "verified_name": None}
