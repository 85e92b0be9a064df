"""Tax ID types and value checks, as Stripe applies them when a tax ID is created.

The type list is Stripe's full enum for API version 2026-10-28.endive (as generated into the
``stripe`` SDK's ``CustomerCreateParamsTaxIdDatum.type``). Values are checked against the format
Stripe documents for the type (https://docs.stripe.com/billing/customer/tax-ids): precisely for
the common types, and with a light sanity check (letters, digits and the separators Stripe's
examples use) for the rest, so a plausible value of a rarer type is accepted.
"""

from __future__ import annotations

import re
from typing import Final

TAX_ID_TYPES: Final[tuple[str, ...]] = (
    "ad_nrt", "ae_trn", "al_tin", "am_tin", "ao_tin", "ar_cuit", "au_abn", "au_acn", "au_arn",
    "au_wpn", "aw_tin", "az_tin", "ba_tin", "bb_tin", "bd_bin", "bf_ifu", "bg_uic", "bh_vat",
    "bj_ifu", "bo_tin", "br_cnpj", "br_cpf", "bs_tin", "bw_vat", "by_tin", "ca_bn",
    "ca_gst_hst", "ca_pst_bc", "ca_pst_mb", "ca_pst_sk", "ca_qst", "cd_nif", "ch_uid",
    "ch_vat", "ci_vat", "cl_tin", "cm_niu", "cn_tin", "co_nit", "cr_tin", "cv_nif", "cz_dic",
    "de_stn", "do_rcn", "ec_ruc", "eg_tin", "es_cif", "et_tin", "eu_oss_vat", "eu_vat",
    "fo_vat", "fr_siren", "fr_siret", "fr_spi", "gb_vat", "ge_vat", "gh_tin", "gi_tin",
    "gn_nif", "hk_br", "hr_oib", "hu_tin", "ic_nif", "id_npwp", "il_vat", "in_gst", "is_kt",
    "is_vat", "it_cf", "jp_cn", "jp_rn", "jp_trn", "ke_pin", "kg_tin", "kh_tin", "kr_brn",
    "kz_bin", "la_tin", "li_uid", "li_vat", "lk_vat", "ma_vat", "md_cf", "md_vat", "me_pib",
    "mk_vat", "mr_nif", "mu_vat", "mx_rfc", "my_frp", "my_itn", "my_sst", "mz_nuit", "ng_tin",
    "no_vat", "no_voec", "np_pan", "nz_bn", "nz_gst", "om_vat", "pe_ruc", "ph_tin", "pl_nip",
    "pt_nif", "py_ruc", "ro_tin", "rs_pib", "ru_inn", "ru_kpp", "sa_vat", "sg_gst", "sg_uen",
    "si_tin", "sm_coe", "sn_ninea", "sr_fin", "sv_nit", "th_vat", "tj_tin", "tr_tin", "tt_bir",
    "tt_vat", "tw_vat", "tz_vat", "ua_vat", "ug_tin", "us_ein", "uy_ruc", "uz_tin", "uz_vat",
    "ve_rif", "vn_tin", "za_vat", "zm_tin", "zw_tin",
)  # fmt: skip

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
