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
    # A None entry makes importing that module raise ModuleNotFoundError; its submodules are
    # hidden too, since an import finds an already-loaded submodule without its parent.
    loaded = [name for name in sys.modules if name.split(".")[0] in hidden]
    for module in {*hidden, *loaded}:
        monkeypatch.setitem(sys.modules, module, None)
    assert main(argv) == 2
    assert "pip install 'memstream[server]'" in capsys.readouterr().err
