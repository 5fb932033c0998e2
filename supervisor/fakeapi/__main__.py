"""`python -m supervisor.fakeapi --script S.yaml`: serve a script for manual runs."""

from __future__ import annotations

import argparse
import threading

from supervisor.fakeapi import ScriptedModelServer, load_script


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--script", required=True, help="YAML file with `conversations:`")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = ScriptedModelServer(load_script(args.script), args.host, args.port, verbose=True)
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    main()
