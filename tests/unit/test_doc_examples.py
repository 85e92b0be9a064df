"""The README and the documentation site show the examples the tests run (``examples/``), word
for word, and show no Python that is not one of them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def code_of(example: Path) -> str:
    """The example without its module docstring: what the pages show."""
    text = example.read_text()
    return text.split('"""\n', 1)[1].lstrip("\n")


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_a_page_shows_each_example_as_it_is_run(example: Path) -> None:
    block = f"```python\n{code_of(example)}```"

    showing = [page for page in PAGES if block in page.read_text()]

    assert showing, f"no page of README.md or docs/ shows examples/{example.name} as it is"


@pytest.mark.parametrize("page", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_python_block_of_a_page_is_an_example_the_tests_run(page: Path) -> None:
    examples = {code_of(example) for example in EXAMPLES}

    untested = [
        block[:80] for block in PYTHON_BLOCK.findall(page.read_text()) if block not in examples
    ]

    assert untested == [], f"{page.name}: put each Python example in examples/ and run it"
