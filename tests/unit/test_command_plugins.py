"""Commands other distributions add (`memstream.commands` entry points): memstream-bench's
`bench` runs through its entry point, and without it `memstream bench` says what to install in
one line instead of a traceback or argparse's "invalid choice"."""

from __future__ import annotations

import argparse
from importlib.metadata import EntryPoint

import pytest

from memstream.cli import main as cli

BENCH = EntryPoint(name="bench", value="memstream_bench.cli:register", group=cli.COMMANDS_GROUP)


def _with_entry_points(monkeypatch: pytest.MonkeyPatch, *found: EntryPoint) -> None:
    monkeypatch.setattr(
        cli, "entry_points", lambda group: found if group == cli.COMMANDS_GROUP else ()
    )


def test_memstream_bench_registers_the_bench_command() -> None:
    assert BENCH in cli.entry_points(group=cli.COMMANDS_GROUP)
    args = cli.build_parser().parse_args(["bench", "recall", "--sizes", "10", "--json"])
    assert args.benches == ["recall"]
    assert args.run.__module__ == "memstream_bench.cli"


@pytest.mark.parametrize(
    "argv",
    [
        ["bench"],
        ["bench", "--help"],
        ["bench", "recall", "--sizes", "10"],
        ["bench", "all", "--json"],
    ],
)
def test_without_memstream_bench_the_command_says_what_to_install(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _with_entry_points(monkeypatch)
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "memstream: `memstream bench` is not installed: pip install 'memstream[bench]' "
        "(in a checkout: make install-dev)\n"
    )


def test_a_command_whose_code_is_gone_says_why_and_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = EntryPoint(name="bench", value="memstream_bench_gone.cli:register", group=BENCH.group)
    _with_entry_points(monkeypatch, gone)
    assert cli.main(["bench", "recall"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert (
        "could not be loaded (ModuleNotFoundError: No module named 'memstream_bench_gone')" in line
    )
    assert line.endswith("pip install 'memstream[bench]' (in a checkout: make install-dev)")


def test_the_missing_command_is_listed_with_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _with_entry_points(monkeypatch)
    assert "not installed: pip install 'memstream[bench]'" in cli.build_parser().format_help()


def test_other_commands_still_refuse_arguments_they_do_not_know(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _with_entry_points(monkeypatch)
    with pytest.raises(SystemExit) as exited:
        cli.main(["status", "--no-such-option"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err


def test_a_plugin_registers_its_command_like_the_products_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hello = EntryPoint(name="hello", value=f"{__name__}:register_hello", group=BENCH.group)
    _with_entry_points(monkeypatch, hello)
    args = cli.build_parser().parse_args(["hello", "--loud"])
    assert args.loud and args.run is _hello


def register_hello(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("hello")
    parser.add_argument("--loud", action="store_true")
    parser.set_defaults(run=_hello)


def _hello(args: argparse.Namespace, deployment: object) -> int:
    return 0


def test_a_plugin_that_fails_half_way_leaves_the_other_commands_working(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = EntryPoint(name="hello", value=f"{__name__}:register_broken", group=BENCH.group)
    _with_entry_points(monkeypatch, broken)
    # memstream's own commands parse as ever...
    assert cli.build_parser().parse_args(["recall", "--tenant", "acme", "q"]).tenant == "acme"
    # ...and the broken one says what went wrong when it is run.
    assert cli.main(["hello", "--loud"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == "memstream: `memstream hello` could not be loaded (RuntimeError: half-way)"


def register_broken(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    register_hello(commands)  # a parser added, then a failure
    raise RuntimeError("half-way")
