"""What a supervisor SIGKILLed inside worker steps costs: workers adopted or run again, model
answers bought twice, and anything left behind, on real parts (tests/kill_real.py says what is
counted and how).

    .venv/bin/python benchmarks/kill_adoption.py --kills 20             # this checkout
    .venv/bin/python benchmarks/kill_adoption.py /tmp/before --kills 20 --json before.json

Each run is one task (a plan of 3 parallel components with a compile gate, a test gate, a review,
the commit) in a fresh repository; each invocation of the supervisor is killed at a random moment
inside a worker step (the worker in a shell command between two model turns, or waiting on a model
answer relayed through the credential proxy), up to --kills-per-run times; the last `resume` runs
to the end. The given checkout's supervisor runs the task (PYTHONPATH); the harness and the
scripted API run from this file's checkout, so run it from a copy when you edit this one meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from kill_real import Run, describe, one_run, totals  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("checkout", nargs="?", type=Path, default=ROOT)
    parser.add_argument("--kills", type=int, default=20, help="kills inside worker steps in all")
    parser.add_argument("--kills-per-run", type=int, default=2)
    parser.add_argument("--shell", type=float, default=6.0, help="a worker's shell command, s")
    parser.add_argument("--think", type=float, default=6.0, help="a model answer's delay, s")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the figures (totals and runs) here")
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    os.environ.setdefault("ANTHROPIC_API_KEY", "bench-key-not-a-secret")
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="kill-adoption-") as tmp:
        os.environ["SUPERVISOR_USER_DIR"] = str(Path(tmp) / "user")
        seed = args.seed
        while sum(len(r.kills) for r in runs) < args.kills:
            left = args.kills - sum(len(r.kills) for r in runs)
            run = one_run(
                checkout, seed, min(args.kills_per_run, left), args.shell, args.think, Path(tmp)
            )
            runs.append(run)
            seed += 1
            print(describe(run), flush=True)
            if not any(r.kills for r in runs[-3:]) and len(runs) >= 3:
                print("three runs without a kill landing inside a worker step: stopping")
                break
    figures = totals(runs)
    print(f"{checkout}: {json.dumps(figures)}")
    if args.json:
        args.json.write_text(
            json.dumps({"totals": figures, "runs": [asdict(r) for r in runs]}, indent=2)
        )


if __name__ == "__main__":
    main()
