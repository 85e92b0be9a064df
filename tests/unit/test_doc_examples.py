"""The README shows the examples the e2e tests run (``examples/``), word for word."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def code_of(example: Path) -> str:
    """The example without its module docstring: what the README shows."""
    text = example.read_text()
    return text.split('"""\n', 1)[1].lstrip("\n")


@pytest.mark.parametrize("name", ["webhook_receiver.py", "stream_consumer.py"])
def test_the_readme_shows_the_example_as_it_is_run(name: str) -> None:
    readme = (ROOT / "README.md").read_text()
    assert f"```python\n{code_of(ROOT / 'examples' / name)}```" in readme, (
        f"README.md does not show examples/{name} as it is"
    )
