#!/usr/bin/env bash
# Runs the test suite on the real parts, after making sure they are set up (fast when they are).
# Arguments go to pytest; its exit code is this script's exit code (5: no tests collected).
set -euo pipefail
cd "$(dirname "$0")/.."
SUPERVISOR_SETUP_QUIET=1 bash scripts/setup.sh
if [ "${CI:-}" = "true" ]; then
  export SUPERVISOR_REQUIRE_REAL_PARTS=1   # under CI a missing real part fails instead of skipping
  bash scripts/setup-scaleout.sh           # PostgreSQL for the shared-state specs (fast when there)
  bash scripts/setup-evals.sh              # Harbor and SWE-bench's harness (Python 3.12) venvs
  # pytest removes all but the last 3 runs' temporary folders when it exits, inside the run's
  # time: a whole run's is ~3 GB in ~100,000 files, 28 s to remove on this machine. Earlier runs'
  # but the newest are moved aside and removed at idle priority beside this one instead. The
  # newest stays so that the numbering goes on: a spec's folder never has an earlier run's path
  # (whose project image or trust would then be found).
  aside=$(python3 - <<'PY'
import getpass, re, tempfile
from pathlib import Path
root = Path(tempfile.gettempdir()) / f"pytest-of-{getpass.getuser()}"
runs = sorted(
    (p for p in root.glob("pytest-*") if re.fullmatch(r"pytest-\d+", p.name)),
    key=lambda p: int(p.name.split("-")[1]),
)
if len(runs) > 1:
    aside = Path(tempfile.mkdtemp(prefix=f"{root.name}-earlier.", dir=root.parent))
    for run in runs[:-1]:
        run.rename(aside / run.name)
    print(aside)
PY
  ) || aside=""
  if [ -n "$aside" ]; then
    idle_io=$(command -v ionice >/dev/null && echo "ionice -c 3")
    (cd / && exec nice -n 19 $idle_io rm -rf "$aside" >/dev/null 2>&1 &)
  fi
fi
# Bytecode is cached even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on
# this machine): the specs start hundreds of Python processes (the CLI, the proxy, the scripted
# API, kill drivers, Temporal workers), and each one compiled SQLAlchemy, pydantic and the engine
# from source, ~1.4 CPU-s apiece (setup installs with uv, which writes no .pyc). The caches land
# in .venv and in the checkout's __pycache__ folders, which git ignores.
unset PYTHONDONTWRITEBYTECODE
# In parallel (pytest-xdist): the end-to-end specs mostly wait on Docker and the CLIs, so three
# processes fill two cores. A file whose specs share an expensive module fixture, or that must not
# interleave, is pinned to one process with `pytest.mark.xdist_group` (see tests/conftest.py).
# SUPERVISOR_TEST_WORKERS=0 runs them in this process, one after another.
exec .venv/bin/python -m pytest -n "${SUPERVISOR_TEST_WORKERS:-3}" --dist loadgroup "$@"
