"""The supervisor's side of the Harbor agent: one task run on a repository, its result as JSON.

Harbor needs Python 3.12 and runs in its own virtual environment; the supervisor runs in its
own. The agent (supervisor/evals/harbor_agent.py, imported by Harbor) brings the task
environment's files into a local git repository and runs, in the supervisor's Python:

    python -m supervisor.evals.harbor_bridge --repo DIR --cli claude --template _base \\
        --instruction-file FILE [--test "make test"] [--model M] [--api URL]

which configures the repository (its test gate, template and CLI; trusted, as the supervisor
made it), runs the task as `start-task --yes` does, and prints one JSON object on stdout: the
run's outcome, the task branch's files to write back (`write`, `delete`), tokens, cost and time.
Exit 0 whatever the outcome (the outcome is in the JSON); 2 when the arguments are unusable.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from supervisor.core import process, trustmap
from supervisor.evals.runner import Named, Result, placeholder_keys, run_in, write_config
from supervisor.lifecycle.opening import workflows

HARBOR = Named("harbor", "-", "harbor", "own keys")


def changes(repo: Path, result: Result) -> dict[str, list[str]]:
    """What the task branch changed from its base: files to write back, files to delete (the
    supervisor's own state folder never goes back). Nothing when nothing reached the branch:
    only the gated result is written back."""
    found = workflows(repo)
    if not result.on_branch or not found:
        return {"write": [], "delete": []}
    wf = found[-1]
    listed = process.run(
        ["git", "-C", str(repo), "diff", "--name-status", "--no-renames", "-z",
         wf.base_sha, wf.task_branch],
    ).stdout.split("\0")  # fmt: skip
    pairs = list(zip(listed[0::2], listed[1::2], strict=False))
    own = trustmap.STATE_DIR + "/"
    keep = [(s, p) for s, p in pairs if p and not p.startswith(own)]
    process.run(["git", "-C", str(repo), "checkout", "-q", wf.task_branch])
    return {
        "write": [p for s, p in keep if s != "D"],
        "delete": [p for s, p in keep if s == "D"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m supervisor.evals.harbor_bridge")
    parser.add_argument("--repo", type=Path, required=True, metavar="DIR")
    parser.add_argument("--instruction-file", type=Path, required=True, metavar="FILE")
    parser.add_argument("--cli", default="claude", metavar="CLI")
    parser.add_argument("--template", default="_base", metavar="NAME")
    parser.add_argument("--test", default=None, metavar="COMMAND")
    parser.add_argument("--model", default=None, metavar="MODEL", help="every role's model")
    parser.add_argument("--api", default=None, metavar="URL", help="a scripted model API")
    args = parser.parse_args(argv)
    text = args.instruction_file.read_text()
    write_config(
        args.repo, test=args.test, template=args.template, cli=args.cli, base_url=args.api,
        model=args.model,
    )  # fmt: skip
    with placeholder_keys() if args.api else nullcontext():
        result = run_in(args.repo, text, HARBOR, cli=args.cli)
    data: dict[str, Any] = {**result.as_dict(), **changes(args.repo, result)}
    sys.stdout.write(json.dumps(data) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
