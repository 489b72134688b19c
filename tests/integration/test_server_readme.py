"""The README's agent-memory-client example runs as written against `memstream serve`."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from .serving import tenant_key

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_client_example_recalls_what_it_saved(
    server: str, env: dict[str, str], tmp_path: Path
) -> None:
    (example,) = re.findall(r"```py\n(.*?)```", README.read_text(), re.S)
    script = tmp_path / "client_example.py"
    script.write_text(example)
    key = tenant_key(env, f"readme-{uuid.uuid4().hex[:8]}")
    result = subprocess.run(
        [sys.executable, str(script)],
        env={**env, "MEMSTREAM_URL": server, "MEMSTREAM_KEY": key},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "The user's cat is called Miso tuesday"
