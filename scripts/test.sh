#!/usr/bin/env bash
# Runs the test suite on the real parts, after making sure they are set up (fast when they are).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${CI:-}" = "true" ]; then
  export SUPERVISOR_REQUIRE_REAL_PARTS=1   # under CI a missing real part fails instead of skipping
fi
exec .venv/bin/python -m pytest "$@"
