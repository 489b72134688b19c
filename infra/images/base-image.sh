#!/usr/bin/env bash
# Makes the base image the Dockerfiles name (docker.io/library/debian:bookworm-slim) without a
# registry: a minimal Debian bookworm from Debian's own package mirror (debootstrap), imported
# into the container engine under the official image's name. For machines that reach Debian's
# mirror but no image registry; where a registry answers, `make images` pulls the real one and
# this script is not used. Idempotent: an engine that already has the image is left alone.
#
#   infra/images/base-image.sh [podman|docker]
set -euo pipefail

engine=${1:-${ENGINE:-podman}}
image=docker.io/library/debian:bookworm-slim
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if "$engine" image inspect "$image" >/dev/null 2>&1; then
  echo "==> $image is already present"
  exit 0
fi
command -v debootstrap >/dev/null || {
  echo "base-image: debootstrap is missing: apt-get install -y debootstrap" >&2
  exit 1
}
[ "$(id -u)" = 0 ] || {
  echo "base-image: debootstrap needs root (it makes device files and chroots)" >&2
  exit 1
}

root=$(mktemp -d /var/tmp/memstream-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "==> debootstrap bookworm (minbase) from $mirror"
if ! debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1; then
  echo "base-image: debootstrap failed (is $mirror reachable?); its last lines:" >&2
  tail -20 "$root.log" >&2
  rm -f "$root.log"
  exit 1
fi
rm -f "$root.log"

# What the official slim image has and a minbase root lacks: the three suites (so security
# fixes install), and apt told to keep no caches, docs or translations inside images.
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
EOF
cat >"$root/etc/dpkg/dpkg.cfg.d/docker-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
EOF
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
rm -rf "$root"/usr/share/{man,info,locale}/* "$root"/var/lib/apt/lists/* \
  "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb "$root"/var/log/*.log

echo "==> importing it as $image"
tar --numeric-owner -C "$root" -c . |
  "$engine" import --change 'CMD ["bash"]' - "$image" >/dev/null
"$engine" image inspect "$image" --format '{{.Size}}' | awk -v i="$image" '{printf "==> %s: %.0f MB\n", i, $1/1e6}'
