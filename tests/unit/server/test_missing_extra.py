"""Without the `server` extra, `serve` and `mcp` say what to install instead of a traceback."""

from __future__ import annotations

import sys

import pytest

from memstream.cli.main import main


@pytest.mark.parametrize(
    ("argv", "hidden"),
    [(["serve"], ["uvicorn"]), (["mcp", "--tenant", "acme"], ["mcp"])],
)
def test_a_server_command_without_the_extra_says_what_to_install(
    argv: list[str],
    hidden: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Imported afresh, so that it meets the missing SDK (monkeypatch puts it back afterwards).
    monkeypatch.delitem(sys.modules, "memstream.server.mcp", raising=False)
    for module in hidden:
        monkeypatch.setitem(sys.modules, module, None)  # importing it raises ModuleNotFoundError
    assert main(argv) == 2
    assert "pip install 'memstream[server]'" in capsys.readouterr().err
