"""The library guide's example (docs/library.md) runs as written and prints what its comments
say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "library.md"


def _example() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    return re.search(r"# Using the library\n\n```python\n(.*?)```", text, re.S).group(1)


@pytest.mark.model
def test_readme_example_runs() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_example(), str(GUIDE), "exec"), {})  # noqa: S102
    lines = out.getvalue().splitlines()
    assert lines[0] == "1 of 3 chunks re-embedded"
    assert lines[1].startswith("Passwords must be changed every 60 days.")
    assert lines[2] == "Passwords must be changed every 90 days."
    assert lines[3] == "['pw@v1#2']"
    assert lines[4] == "['created', 'supersedes', 'promoted', 'access']"
