#!/bin/sh
# gemini on the image's own Node 24 (scripts/setup.sh stages it when npm installed it for this
# platform), with the compile cache made when the image was built: Node 20 compiles gemini's
# 16 MB bundle on every start, ~0.45 of its ~3.2 CPU-s a run (benchmarks/cli_start.py).
# Node names the cache's folder after the user id, which is the host's and unknown at build
# time, so the built folder is linked under that id's name in the container's own /tmp. Any
# step that fails leaves gemini running without the cache, never not running.
cache=/opt/supervisor/node-compile-cache
if [ -z "${NODE_COMPILE_CACHE:-}" ]; then
  for built in "$cache"/v*; do
    here=/tmp/.node-compile-cache
    if [ -d "$built" ] && mkdir -p "$here" 2>/dev/null \
      && ln -sfn "$built" "$here/$(basename "${built%-*}")-$(id -u)" 2>/dev/null; then
      export NODE_COMPILE_CACHE="$here"
    fi
  done
fi
exec /opt/supervisor/node24/node /opt/supervisor/node_modules/.bin/gemini "$@"
