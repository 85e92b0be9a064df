"""Tax ids: Stripe's tax id types, and how a generic kind of tax maps onto one.

The spec lets ``tax_data[].type`` be a generic kind (``vat``, ``gst``, ``sales_tax``) or a
provider-specific type (``us_ein``, ``uk_vat``, ``in_gst``...). We store and send Stripe's own
type: a generic kind is resolved from the address country, and ``uk_vat`` (the spec's example,
not a Stripe type) is Stripe's ``gb_vat``.
"""

from __future__ import annotations

from typing import Final

# Stripe's full enum for API version 2026-10-28.endive (``CustomerCreateParamsTaxIdDatum.type``
# in the SDK; a unit test keeps the two equal).
STRIPE_TAX_ID_TYPES: Final[tuple[str, ...]] = (
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

ALIASES: Final[dict[str, str]] = {"uk_vat": "gb_vat"}
GENERIC_KINDS: Final[tuple[str, ...]] = ("vat", "gst", "sales_tax")

EU_MEMBER_STATES: Final[frozenset[str]] = frozenset(
    [
        "AT",
        "BE",
        "BG",
        "CY",
        "CZ",
        "DE",
        "DK",
        "EE",
        "ES",
        "FI",
        "FR",
        "GR",
        "HR",
        "HU",
        "IE",
        "IT",
        "LT",
        "LU",
        "LV",
        "MT",
        "NL",
        "PL",
        "PT",
        "RO",
        "SE",
        "SI",
        "SK",
    ]
)

# Countries whose tax id for a generic kind is not simply ``<country>_<kind>``.
_SPECIAL: Final[dict[tuple[str, str], str]] = {
    ("vat", "AE"): "ae_trn",
    ("vat", "GB"): "gb_vat",
    ("gst", "AU"): "au_abn",
    ("gst", "CA"): "ca_gst_hst",
    ("sales_tax", "US"): "us_ein",
    ("sales_tax", "MY"): "my_sst",
}


class UnmappableTaxType(ValueError):
    """A generic kind that has no Stripe type for the country (or no country to decide by)."""


def resolve_tax_type(kind: str, country: str | None) -> str:
    """Stripe's tax id type for ``kind`` (already lower case), given the ISO country code.

    Raises :class:`UnmappableTaxType` (or ``ValueError`` for an unknown type) with a message
    fit for the caller.
    """
    kind = ALIASES.get(kind, kind)
    if kind in STRIPE_TAX_ID_TYPES:
        return kind
    if kind not in GENERIC_KINDS:
        raise ValueError(
            f"unknown tax type {kind!r}: use a generic kind ({', '.join(GENERIC_KINDS)}) or a "
            "Stripe tax id type such as eu_vat, gb_vat, us_ein or in_gst"
        )
    if not country:
        raise UnmappableTaxType(
            f"the generic tax type {kind!r} needs address.country to choose the provider's type"
        )
    special = _SPECIAL.get((kind, country))
    if special is not None:
        return special
    if kind == "vat" and country in EU_MEMBER_STATES:
        return "eu_vat"
    candidate = f"{country.lower()}_{kind}"
    if candidate in STRIPE_TAX_ID_TYPES:
        return candidate
    raise UnmappableTaxType(
        f"no provider tax type for {kind!r} in country {country!r}: send the provider's own type"
    )
