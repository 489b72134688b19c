#!/usr/bin/env bash
# A container engine on a Debian machine without Docker, as CI and these machines need it:
# podman with runc, podman's Docker-compatible socket (what testcontainers and the docker CLI
# talk to), debootstrap for the base image (infra/images/base-image.sh) and podman-compose
# (infra/compose.yaml) into the checkout's .venv. Idempotent; run as root. Prints the
# DOCKER_HOST to export. Every step that fails stops the script and says why.
set -euo pipefail
cd "$(dirname "$0")/../.."
socket=/run/podman/podman.sock

step() { printf '==> %s\n' "$*"; }
fail() {
  printf 'podman: %s\n' "$*" >&2
  exit 1
}

[ "$(id -u)" = 0 ] || fail "run as root (it installs packages and starts podman's socket)"
missing=()
for tool in podman runc debootstrap; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  step "installing ${missing[*]} from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null || fail "apt-get update failed: is Debian's mirror reachable?"
  apt-get install -y -q podman runc debootstrap >/dev/null ||
    fail "apt-get install podman runc debootstrap failed"
fi

# podman's default ulimits exceed these machines' hard limits (runc then refuses to start the
# container), and crun refuses their hybrid cgroup layout where runc does not.
conf=/etc/containers/containers.conf
if ! grep -q '^default_ulimits = \[\]' "$conf" 2>/dev/null; then
  step "writing $conf (no default ulimits, runc, cgroupfs)"
  [ -s "$conf" ] && fail "$conf exists with settings of its own; add default_ulimits = [] under [containers] by hand"
  mkdir -p "$(dirname "$conf")"
  cat >"$conf" <<'EOF'
[containers]
default_ulimits = []

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
EOF
fi
podman info >/dev/null 2>&1 || fail "podman does not work: $(podman info 2>&1 | tail -1)"

if ! curl -sf --unix-socket "$socket" http://d/_ping >/dev/null 2>&1; then
  step "starting podman's Docker-compatible socket at $socket"
  mkdir -p "$(dirname "$socket")"
  # No timeout: it serves until the machine stops (CI's machine is discarded after the run).
  # Started from / : a service whose working folder is deleted (a CI clone removed after its
  # run) fails every container start with 500 "write child: broken pipe".
  (cd / && nohup podman system service --time=0 "unix://$socket" >/var/log/podman-service.log 2>&1 &)
  for _ in $(seq 100); do
    curl -sf --unix-socket "$socket" http://d/_ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -sf --unix-socket "$socket" http://d/_ping >/dev/null 2>&1 ||
    fail "podman's socket did not answer: $(tail -3 /var/log/podman-service.log)"
fi

if [ ! -x .venv/bin/podman-compose ]; then
  step "installing podman-compose 1.6.0 (PyPI) into .venv: Debian's 1.0.3 ignores --scale"
  .venv/bin/python -m pip install -q --disable-pip-version-check --cache-dir .cache/pip \
    podman-compose==1.6.0 || fail "pip install podman-compose failed"
fi
step "podman answers; export DOCKER_HOST=unix://$socket"
