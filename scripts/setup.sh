#!/usr/bin/env bash
# Sets up everything supervisor needs on a fresh Debian machine: system packages, a Docker engine,
# the Python virtualenv, the pinned npm tools (Repomix and the AI CLIs), and the sandbox image.
# Every step is skipped when its inputs have not changed, so a second run takes seconds.
#
# Environment:
#   SUPERVISOR_EXTRA_CA_BUNDLE  a PEM bundle trusted inside the sandbox image (intercepting proxies)
#   SUPERVISOR_IMAGE            the sandbox image tag (default supervisor-sandbox:latest)
set -euo pipefail
shopt -s nullglob
cd "$(dirname "$0")/.."
ROOT=$PWD
IMAGE=${SUPERVISOR_IMAGE:-supervisor-sandbox:latest}
BASE_IMAGE=debian:bookworm-slim
CACHE=$ROOT/.cache/sandbox

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] FAILED: %s\n        fix: %s\n' "$1" "$2" >&2; exit 1; }
step_start() { STEP_T0=$(date +%s.%N); }
step_done() { log "$1 ($(awk -v a="$STEP_T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s)"; }
hash_of() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# 1. System packages -------------------------------------------------------------------------
step_start
missing=()
command -v git >/dev/null || missing+=(git)
command -v make >/dev/null || missing+=(make)
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v node >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} from Debian"
  as_root apt-get update -qq || die "apt-get update failed" "check the network access to the Debian mirror"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed" "install them by hand and re-run"
fi
node_major=$(node -e 'console.log(process.versions.node.split(".")[0])')
[ "$node_major" -ge 20 ] || die "Node $node_major is too old (Repomix and gemini-cli need 20+)" \
  "install Node.js 20 or newer, then re-run"
step_done "system packages ready"

# 2. Docker engine ---------------------------------------------------------------------------
step_start
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  as_root setsid nohup dockerd >/tmp/dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || die "the Docker engine did not start (see /tmp/dockerd.log)" \
    "start it yourself (systemctl start docker) and re-run"
fi
step_done "Docker engine answers"

# 3. Python virtualenv -----------------------------------------------------------------------
step_start
py_hash=$(hash_of requirements.txt pyproject.toml)
if [ "$(cat .venv/.setup-stamp 2>/dev/null)" != "$py_hash" ]; then
  log "installing Python packages into .venv"
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip >/dev/null 2>&1 || true
  .venv/bin/pip install -q -r requirements.txt || die "pip install -r requirements.txt failed" \
    "check access to PyPI (or your pip index settings)"
  .venv/bin/pip install -q --no-deps -e . || die "pip install -e . failed" "see the pip output above"
  echo "$py_hash" > .venv/.setup-stamp
fi
step_done "Python environment ready"

# 4. Pinned npm tools ------------------------------------------------------------------------
step_start
npm_hash=$(hash_of package-lock.json)
if [ "$(cat node_modules/.setup-stamp 2>/dev/null)" != "$npm_hash" ]; then
  log "installing Repomix and the AI CLIs from npm (npm ci)"
  npm ci --no-audit --no-fund --loglevel=error >/dev/null || die "npm ci failed" \
    "check access to the npm registry; set npm's cafile behind an intercepting proxy"
  echo "$npm_hash" > node_modules/.setup-stamp
fi
step_done "npm tools ready ($(node_modules/.bin/claude --version 2>/dev/null | head -1))"

# 5. Base image: from a registry when one answers, else built from Debian's own packages -------
step_start
if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  if timeout 30 docker pull -q "$BASE_IMAGE" >/dev/null 2>&1; then
    log "pulled $BASE_IMAGE"
  else
    log "no registry reachable: building $BASE_IMAGE with debootstrap (about a minute)"
    rootfs=$(mktemp -d /tmp/supervisor-rootfs.XXXXXX)
    as_root debootstrap --variant=minbase --include=ca-certificates,git,make,python3,libstdc++6,passwd \
      bookworm "$rootfs" http://deb.debian.org/debian >/tmp/supervisor-debootstrap.log 2>&1 \
      || die "debootstrap failed (see /tmp/supervisor-debootstrap.log)" "check access to the Debian mirror"
    as_root tar -C "$rootfs" -c . | docker import - "$BASE_IMAGE" >/dev/null
    as_root rm -rf "$rootfs"
  fi
fi
step_done "base image $BASE_IMAGE present"

# 6. Sandbox image: rebuilt only when the Dockerfile, the npm pins, Node or the CA bundle change --
step_start
mkdir -p "$CACHE/extra-ca"
cp "$(command -v node)" "$CACHE/node.new" && mv "$CACHE/node.new" "$CACHE/node"
# npm too, so that project images (supervisor sandbox build) can install a Node project's packages.
npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
if [ "$(cat "$CACHE/npm/package.json" 2>/dev/null | sha256sum)" != "$(sha256sum < "$npm_dir/package.json")" ]; then
  rm -rf "$CACHE/npm" && cp -r "$npm_dir" "$CACHE/npm"
fi
rm -f "$CACHE"/extra-ca/*
if [ -n "${SUPERVISOR_EXTRA_CA_BUNDLE:-}" ]; then
  [ -f "$SUPERVISOR_EXTRA_CA_BUNDLE" ] || die "SUPERVISOR_EXTRA_CA_BUNDLE=$SUPERVISOR_EXTRA_CA_BUNDLE is not a file" \
    "point it at a PEM bundle, or unset it"
  cp "$SUPERVISOR_EXTRA_CA_BUNDLE" "$CACHE/extra-ca/extra.crt"
fi
build_hash=$(cat sandbox/Dockerfile .dockerignore package-lock.json "$CACHE/node" "$CACHE/npm/package.json" "$CACHE"/extra-ca/* \
  | sha256sum | cut -c1-16)
current=$(docker image inspect -f '{{ index .Config.Labels "supervisor.build-hash" }}' "$IMAGE" 2>/dev/null || true)
if [ "$current" != "$build_hash" ]; then
  log "building $IMAGE"
  DOCKER_BUILDKIT=0 docker build -q -f sandbox/Dockerfile --label "supervisor.build-hash=$build_hash" \
    -t "$IMAGE" . >/tmp/supervisor-image-build.log 2>&1 \
    || { tail -20 /tmp/supervisor-image-build.log >&2; die "building $IMAGE failed" "see the build log above"; }
fi
step_done "sandbox image $IMAGE ready ($build_hash)"
log "done"
