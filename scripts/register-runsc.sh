#!/usr/bin/env bash
# Optional stronger isolation: installs gVisor's `runsc` (Debian's package) and registers it with
# the Docker engine under two names, for `sandbox.runtime` / `sandbox.worker_runtime`:
#   runsc      gVisor with --network=none: gates, checks and probes (they have no network anyway;
#              gVisor then makes no network system call on the host at all)
#   runsc-net  gVisor with --network=host: workers. Debian's runsc (2022) refuses its own network
#              stack on kernels that give every network namespace net.core.rmem_default (6.x:
#              "cannot run with network enabled in root network namespace"); with host it uses
#              the host kernel's stack inside the worker's own internal, firewalled namespace.
# The names go into /etc/docker/daemon.json ("runtimes"), merged with what is there; a name the
# engine already knows (from its command line or an earlier run) is left alone, and so is an
# entry of ours the user changed. A running engine reloads the file on SIGHUP (runtimes are
# reloadable; running containers are not touched), so nobody's containers stop.
# Nothing here is required: without apt or root, this says so and setup goes on.
#
# Environment: SUPERVISOR_DOCKER_DAEMON_JSON (default /etc/docker/daemon.json),
#              SUPERVISOR_DOCKER_PIDFILE (default /var/run/docker.pid).
set -euo pipefail
DAEMON_JSON=${SUPERVISOR_DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}
PIDFILE=${SUPERVISOR_DOCKER_PIDFILE:-/var/run/docker.pid}
RUNSC=/usr/bin/runsc

log() { printf '[setup] %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }
known() { docker info --format '{{range $name, $_ := .Runtimes}} {{$name}} {{end}}' 2>/dev/null; }
has() { case "$2" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

runtimes=$(known || true)
if has runsc "$runtimes" && has runsc-net "$runtimes"; then exit 0; fi

if [ ! -x "$RUNSC" ]; then
  if ! command -v apt-get >/dev/null \
    || ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc >/dev/null 2>&1; then
    log "gVisor (runsc) not installed: apt-get install runsc failed or is not available (optional:" \
      "only sandbox.runtime: runsc needs it)"
    exit 0
  fi
  log "installed gVisor: $("$RUNSC" --version | head -n 1)"
fi

# Merge our two entries into daemon.json; prints "changed" when the file was rewritten.
merged=$(as_root python3 - "$DAEMON_JSON" "$RUNSC" "$runtimes" <<'EOF'
import json, os, sys, tempfile
path, runsc, known = sys.argv[1], sys.argv[2], sys.argv[3].split()
ours = {
    "runsc": {"path": runsc, "runtimeArgs": ["--network=none"]},
    "runsc-net": {"path": runsc, "runtimeArgs": ["--network=host"]},
}
try:
    with open(path) as f:
        config = json.load(f)
except FileNotFoundError:
    config = {}
if not isinstance(config, dict) or not isinstance(config.setdefault("runtimes", {}), dict):
    sys.exit(f"{path} is not a JSON object with a 'runtimes' object")
wanted = {k: v for k, v in ours.items() if k not in config["runtimes"] and k not in known}
if wanted:
    config["runtimes"].update(wanted)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
    with os.fdopen(fd, "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    print("changed")
EOF
) || { log "could not update $DAEMON_JSON (gVisor stays unregistered; optional)"; exit 0; }

[ "$merged" = changed ] && log "registered runsc and runsc-net in $DAEMON_JSON"
if [ -n "$runtimes" ]; then  # the engine runs: reload its configuration, containers untouched
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  if [ -z "$pid" ] || ! as_root kill -HUP "$pid" 2>/dev/null; then
    log "the Docker engine did not reload $DAEMON_JSON (no pid in $PIDFILE):" \
      "run \`sudo systemctl reload docker\` (or send dockerd SIGHUP) to use gVisor"
    exit 0
  fi
  for _ in $(seq 1 40); do has runsc-net "$(known)" && break; sleep 0.25; done
  if has runsc-net "$(known)"; then
    log "the Docker engine reloaded $DAEMON_JSON: runtimes:$(known | tr -s " ")"
  else
    log "the Docker engine did not pick up runsc-net after SIGHUP (see its log)"
  fi
fi
exit 0
