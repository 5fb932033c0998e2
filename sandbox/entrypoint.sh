#!/bin/sh
# The sandbox image's entrypoint. The root file system is read-only and HOME points into the
# /tmp tmpfs (/tmp/home), which starts empty: create it so that the CLIs can keep their state
# there, then run the command unchanged.
if [ -n "${HOME:-}" ] && [ ! -d "$HOME" ]; then
  mkdir -p "$HOME" 2>/dev/null || true
fi
exec "$@"
