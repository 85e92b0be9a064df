"""The mutation score's report (tests/support/mutation_score.py): what counts as killed."""

from __future__ import annotations

import tomllib

from tests.support.mutation_score import ROOT, TARGET, report, scores

RESULTS = """
    domain.billing.currencies.x_format_amount__mutmut_1: killed
    domain.billing.currencies.x_format_amount__mutmut_2: timeout
    domain.billing.currencies.x_format_amount__mutmut_3: survived
    domain.billing.currencies.x_format_amount__mutmut_4: no tests
    domain.provider.rate_budget.xǁRateLimitedǁ__init____mutmut_1: killed
    domain.provider.rate_budget.xǁRateLimitedǁ__init____mutmut_2: not checked
"""


def test_a_timeout_counts_as_killed_and_a_mutant_no_test_reaches_as_survived() -> None:
    currencies, rate_budget = scores(RESULTS)

    assert currencies.module == "domain.billing.currencies"
    assert (currencies.killed, currencies.total) == (2, 4)
    assert currencies.survivors == [
        "domain.billing.currencies.x_format_amount__mutmut_3 (survived)",
        "domain.billing.currencies.x_format_amount__mutmut_4 (no tests)",
    ]
    assert rate_budget.module == "domain.provider.rate_budget"
    assert (rate_budget.killed, rate_budget.total) == (1, 1)


def test_the_report_marks_a_module_below_the_target_and_names_its_survivors() -> None:
    text = report(scores(RESULTS))

    assert f"below {TARGET:.0%}" in text.splitlines()[1]
    assert "below" not in text.splitlines()[2]
    assert "x_format_amount__mutmut_3 (survived)" in text


def test_every_module_mutated_and_every_test_run_by_the_mutation_score_exists() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    named = [*config["only_mutate"], *config["pytest_add_cli_args_test_selection"]]

    assert named
    assert [path for path in named if not (ROOT / path).is_file()] == []
    assert all(
        any(path.startswith(f"{source}/") for source in config["source_paths"])
        for path in config["only_mutate"]
    )
