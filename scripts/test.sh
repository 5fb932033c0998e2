#!/usr/bin/env bash
# Runs the test suite on the real parts, after making sure they are set up (fast when they are).
# Arguments go to pytest; its exit code is this script's exit code (5: no tests collected).
set -euo pipefail
cd "$(dirname "$0")/.."
SUPERVISOR_SETUP_QUIET=1 bash scripts/setup.sh
if [ "${CI:-}" = "true" ]; then
  export SUPERVISOR_REQUIRE_REAL_PARTS=1   # under CI a missing real part fails instead of skipping
fi
exec .venv/bin/python -m pytest "$@"
