"""Guards on the package as a whole: exports match, every module imports cleanly."""

import importlib
import pkgutil

import memstream


def test_exported_members_are_exactly_the_public_names() -> None:
    public = {name for name in vars(memstream) if not name.startswith("_")}
    modules = {name for name, value in vars(memstream).items() if type(value).__name__ == "module"}
    assert set(memstream.__all__) - {"__version__"} == public - modules


def test_every_module_imports() -> None:
    names = [m.name for m in pkgutil.walk_packages(memstream.__path__, "memstream.")]
    assert "memstream.streams.worker" in names
    for name in names:
        if name == "memstream.__main__":
            continue
        importlib.import_module(name)


def test_every_module_says_what_it_owns() -> None:
    for info in pkgutil.walk_packages(memstream.__path__, "memstream."):
        module = importlib.import_module(info.name) if info.name != "memstream.__main__" else None
        if module is not None:
            assert (module.__doc__ or "").strip(), f"{info.name} has no docstring"
