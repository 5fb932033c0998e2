"""`python -m supervisor.fakeapi --script S.yaml [--host H] [--port N]`: serve a script by hand.

The URL goes to stdout as the first line, so a wrapper can read it before starting a CLI; the
request log goes to stderr.
"""

from __future__ import annotations

import argparse
import threading

from supervisor.fakeapi import ScriptedModelServer, load_script


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--script", required=True, help="YAML file with `conversations:`")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="log only unanswered requests")
    args = parser.parse_args(argv)
    server = ScriptedModelServer(
        load_script(args.script), args.host, args.port, verbose=not args.quiet
    )
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


if __name__ == "__main__":
    main()
