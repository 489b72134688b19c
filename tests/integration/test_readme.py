"""The README's Python example runs as written against the real stack."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import TestStack

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_example_remembers_across_threads(
    stack: TestStack, env: dict[str, str], tmp_path: Path
) -> None:
    examples = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    (example,) = [e for e in examples if "memstream.agent import" in e]
    script = tmp_path / "example.py"
    script.write_text(example)
    result = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "From my semantic-memory section:" in result.stdout
    assert "My favourite colour is teal." in result.stdout
    assert "Usage(calls=1," in result.stdout
