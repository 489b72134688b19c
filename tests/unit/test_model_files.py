"""Model files from a folder or a hub revision, each checked against its pin: the same model
id and the same vectors as the packaged default, tampering refused naming the file, a hub
download made once (a local server stands in for the hub) and never for a model id."""

from __future__ import annotations

import hashlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from memstream import Settings
from memstream.errors import ConfigurationError
from memstream.memory.embeddings import Embedder
from memstream.providers import embedder_from_settings, embedding_model_id
from memstream.providers.bge import BGE_FILES, BGE_MODEL_ID, BgeSmallEmbedder
from memstream.providers.model_files import (
    HubRevision,
    LocalFolder,
    ModelFiles,
    model_source,
    package_file,
)

COMMIT = "0123456789abcdef0123456789abcdef01234567"
TOKEN = "hf_secret-token-never-shown"
TEXTS = ["Alice moved to Lisbon in 2021.", "What city does Alice live in?", ""]


def _pins(files: ModelFiles) -> str:
    return ",".join(f"{name}={digest}" for name, digest in files.pins)


@pytest.fixture(scope="module")
def bge_bytes() -> dict[str, bytes]:
    """The packaged bge-small files, as a user would copy them."""
    found = {}
    for name in BGE_FILES.names:
        path = package_file("compartment", f"models/bge-small-en-v1.5-int8/{name}")
        assert path is not None, "infra/install.sh installs compartment"
        found[name] = path.read_bytes()
    return found


@pytest.fixture(scope="module")
def packaged() -> BgeSmallEmbedder:
    return BgeSmallEmbedder()


@pytest.fixture
def folder(tmp_path: Path, bge_bytes: dict[str, bytes]) -> Path:
    copy = tmp_path / "bge"
    copy.mkdir()
    for name, data in bge_bytes.items():
        (copy / name).write_bytes(data)
    return copy


@pytest.fixture(autouse=True)
def _hub_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMSTREAM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)


def _onnx_settings(source: str) -> Settings:
    return Settings(
        embedder="onnx",
        embedder_source=source,
        embedder_files=_pins(BGE_FILES),
        embedder_pooling="cls",
        embedder_max_tokens=512,
    )


def _same_vectors(embedder: Embedder, packaged: BgeSmallEmbedder) -> None:
    assert np.array_equal(embedder.embed_documents(TEXTS), packaged.embed_documents(TEXTS))
    assert np.array_equal(embedder.embed_query(TEXTS[1]), packaged.embed_query(TEXTS[1]))


# -- a local folder --------------------------------------------------------------------------


def test_the_onnx_embedder_with_bges_pins_embeds_as_the_packaged_bge(
    folder: Path, packaged: BgeSmallEmbedder
) -> None:
    embedder = embedder_from_settings(_onnx_settings(str(folder)))
    assert embedder.dims == 384  # read off the model
    assert embedder.model_id.startswith(f"onnx@{BGE_FILES.pins[0][1][:12]}+")
    _same_vectors(embedder, packaged)


def test_bge_from_a_folder_is_the_same_model_with_the_same_vectors(
    folder: Path, packaged: BgeSmallEmbedder
) -> None:
    settings = Settings(embedder_source=str(folder))
    assert embedding_model_id(settings) == BGE_MODEL_ID
    embedder = embedder_from_settings(settings)
    assert embedder.model_id == BGE_MODEL_ID
    _same_vectors(embedder, packaged)


def test_a_tampered_file_is_refused_naming_it_and_both_digests(folder: Path) -> None:
    tokenizer = folder / "tokenizer.json"
    tokenizer.write_bytes(tokenizer.read_bytes().replace(b"[CLS]", b"[CLX]", 1))
    actual = hashlib.sha256(tokenizer.read_bytes()).hexdigest()
    with pytest.raises(ConfigurationError) as refused:
        embedder_from_settings(Settings(embedder_source=str(folder)))
    said = str(refused.value)
    assert str(tokenizer) in said and actual[:12] in said
    assert BGE_FILES.pins[1][1][:12] in said and "pin" in said


def test_a_folder_without_a_pinned_file_names_what_it_lacks(folder: Path) -> None:
    (folder / "model_quantized.onnx").unlink()
    with pytest.raises(ConfigurationError) as refused:
        LocalFolder(folder, "MEMSTREAM_EMBEDDER_SOURCE").folder(BGE_FILES)
    said = str(refused.value)
    assert "lacks model_quantized.onnx" in said and str(folder) in said


# -- the hub, a local server in its place -----------------------------------------------------


@dataclass
class Hub:
    """A stand-in for the hub's /{repo}/resolve/{revision}/{path}: the files it serves, and the
    requests it got (path, Authorization header)."""

    endpoint: str
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    served = Hub(endpoint="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.requests.append((self.path, self.headers.get("Authorization")))
            body = served.files.get(self.path)
            self.send_response(404 if body is None else 200)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    served.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("HF_ENDPOINT", served.endpoint)
    yield served
    server.shutdown()
    server.server_close()


def _serve_bge(hub: Hub, bge_bytes: dict[str, bytes], folder: str = "") -> str:
    prefix = f"/{folder}" if folder else ""
    for name, data in bge_bytes.items():
        hub.files[f"/acme/bge-small/resolve/{COMMIT}{prefix}/{name}"] = data
    return f"hf://acme/bge-small@{COMMIT}{prefix}"


def test_a_hub_revision_downloads_once_checks_caches_and_is_read_from_the_cache(
    hub: Hub, bge_bytes: dict[str, bytes], tmp_path: Path, packaged: BgeSmallEmbedder
) -> None:
    source = _serve_bge(hub, bge_bytes, folder="onnx/int8")
    settings = Settings(embedder_source=source)
    embedder = embedder_from_settings(settings)
    assert embedder.model_id == BGE_MODEL_ID
    assert sorted(path for path, _ in hub.requests) == sorted(hub.files)
    cached = tmp_path / "cache" / "models" / "acme" / "bge-small" / COMMIT / "onnx" / "int8"
    assert sorted(p.name for p in cached.iterdir()) == sorted(BGE_FILES.names)  # no .part left
    _same_vectors(embedder, packaged)

    hub.files.clear()  # a second start reads the cache, never the network
    assert model_source(source, setting="S").folder(BGE_FILES) == cached
    assert len(hub.requests) == len(BGE_FILES.pins)


def test_a_file_that_differs_on_the_hub_is_refused_and_not_cached(
    hub: Hub, bge_bytes: dict[str, bytes], tmp_path: Path
) -> None:
    source = _serve_bge(hub, {**bge_bytes, "tokenizer.json": b"{}"})
    with pytest.raises(ConfigurationError) as refused:
        model_source(source, setting="S").folder(BGE_FILES)
    said = str(refused.value)
    assert f"/{COMMIT}/tokenizer.json" in said
    assert hashlib.sha256(b"{}").hexdigest()[:12] in said and BGE_FILES.pins[1][1][:12] in said
    cached = tmp_path / "cache" / "models" / "acme" / "bge-small" / COMMIT
    assert [p.name for p in cached.iterdir()] == ["model_quantized.onnx"]


def test_the_token_is_sent_as_a_bearer_and_never_shown(
    hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    source = model_source(f"hf://acme/private@{COMMIT}", setting="MEMSTREAM_EMBEDDER_SOURCE")
    with pytest.raises(ConfigurationError) as refused:  # the hub serves nothing: 404
        source.folder(BGE_FILES)
    said = str(refused.value)
    assert hub.requests == [
        (f"/acme/private/resolve/{COMMIT}/model_quantized.onnx", f"Bearer {TOKEN}")
    ]
    assert "answered 404" in said and "MEMSTREAM_EMBEDDER_SOURCE" in said
    assert TOKEN not in said and TOKEN not in repr(source)


def test_an_unreachable_hub_says_which_url_and_that_a_folder_works_offline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as free:  # a port nothing listens on once it is closed
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with pytest.raises(ConfigurationError) as refused:
        model_source(f"hf://acme/bge@{COMMIT}", setting="S").folder(BGE_FILES)
    said = str(refused.value)
    assert f"http://127.0.0.1:{port}/acme/bge/resolve/{COMMIT}/model_quantized.onnx" in said
    assert "offline" in said and "local folder" in said and TOKEN not in said


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("hf://acme/bge@main", "not a commit id"),
        ("hf://acme/bge@v1.5", "not a commit id"),
        (f"hf://acme/bge@{COMMIT[:12]}", "not a commit id"),
        (f"hf://bge@{COMMIT}", "OWNER/REPO@COMMIT"),
        ("hf://acme/bge", "OWNER/REPO@COMMIT"),
        (f"hf://acme/bge@{COMMIT}/../elsewhere", "without '..'"),
        ("s3://bucket/models", "neither a folder nor a hub source"),
    ],
)
def test_a_source_that_could_move_or_is_malformed_is_refused(source: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        model_source(source, setting="MEMSTREAM_EMBEDDER_SOURCE")


@pytest.mark.parametrize(
    ("files", "says"),
    [
        ("model.onnx", "not NAME=SHA256"),
        ("model.onnx=abc123", "not a sha256 digest"),
        (f"model.onnx={'a' * 64},model.onnx={'b' * 64}", "names a file twice"),
        (f"/etc/model.onnx={'a' * 64}", "relative path"),
        (f"model.onnx={'a' * 64}", "one tokenizer.json"),
    ],
)
def test_malformed_pins_are_refused_naming_the_setting(files: str, says: str) -> None:
    settings = Settings(embedder="onnx", embedder_source="/models", embedder_files=files)
    with pytest.raises(ConfigurationError, match=says) as refused:
        embedding_model_id(settings)
    assert "MEMSTREAM_EMBEDDER_FILES" in str(refused.value)


# -- model ids: settings only, nothing read or downloaded --------------------------------------


def test_model_ids_of_folder_and_hub_sources_load_and_download_nothing(hub: Hub) -> None:
    hub_source = f"hf://acme/bge-small@{COMMIT}"
    onnx_id = embedding_model_id(_onnx_settings(hub_source))
    assert onnx_id == embedding_model_id(_onnx_settings("/no/such/folder"))
    assert embedding_model_id(Settings(embedder_source=hub_source)) == BGE_MODEL_ID
    assert embedding_model_id(Settings(embedder_source="/no/such/folder")) == BGE_MODEL_ID
    assert hub.requests == []


def test_the_onnx_model_id_changes_with_whatever_shapes_its_vectors() -> None:
    base = _onnx_settings("/models")
    other_tokenizer = f"{_pins(BGE_FILES)[:-1]}0"
    ids = {
        embedding_model_id(base),
        embedding_model_id(replace(base, embedder_pooling="mean")),
        embedding_model_id(replace(base, embedder_max_tokens=256)),
        embedding_model_id(replace(base, embedder_files=other_tokenizer)),
    }
    assert len(ids) == 4


def test_onnx_needs_its_pins_and_a_source_bge_takes_no_pins_minilm_no_source() -> None:
    with pytest.raises(ConfigurationError, match="needs MEMSTREAM_EMBEDDER_FILES"):
        embedding_model_id(Settings(embedder="onnx", embedder_source="/models"))
    with pytest.raises(ConfigurationError, match="needs MEMSTREAM_EMBEDDER_SOURCE"):
        embedder_from_settings(Settings(embedder="onnx", embedder_files=_pins(BGE_FILES)))
    with pytest.raises(ConfigurationError, match="MEMSTREAM_EMBEDDER_FILES pins the files of"):
        embedder_from_settings(Settings(embedder_files=_pins(BGE_FILES)))
    with pytest.raises(ConfigurationError, match="not for minilm-int8"):
        embedder_from_settings(Settings(embedder="minilm-int8", embedder_source="/models"))


def test_a_hub_source_reads_the_hubs_endpoint_and_token_from_the_environment() -> None:
    source = model_source(
        f"hf://acme/bge@{COMMIT}/onnx",
        setting="S",
        environ={"HF_ENDPOINT": "http://mirror.local", "HF_TOKEN": TOKEN},
    )
    assert isinstance(source, HubRevision)
    assert (source.repo, source.revision, source.subfolder) == ("acme/bge", COMMIT, "onnx")
    assert (source.endpoint, source.token) == ("http://mirror.local", TOKEN)
    assert model_source("~/models", setting="S") == LocalFolder(
        Path("~/models").expanduser().resolve(), "S"
    )
