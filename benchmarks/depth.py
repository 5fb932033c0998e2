"""What adaptive depth costs and saves, per path, on the real parts, in one run.

    .venv/bin/python benchmarks/depth.py [--only simple-fix|feature]

Two scripted tasks on the demo repository, each run through `start-task` with the real `claude`
binary in the real sandbox against the scripted model API: a simple fix (one file) and a
3-component feature. Each runs at `--depth auto` (the analyzer decides: simple for the fix,
planned for the feature), at the fixed pipeline (`--depth planned`, the behaviour before adaptive
depth) and, for the fix, at `--depth simple`. Printed per run: model conversations (one per
worker run), request bytes sent to the model API (what the prompts cost, roughly), the models
used, and the wall time of the whole task. Wall times depend on the machine's load: compare rows
of the same run only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from supervisor import process, tasks  # noqa: E402
from supervisor.demo import (  # noqa: E402
    CALC_FIXED,
    fenced,
    implementation,
    make_demo_repo,
    read_turn,
    write_project_config,
)
from supervisor.fakeapi import ScriptedModelServer, load_script  # noqa: E402

FIX = "Implement add() and multiply() in calc.py so that the tests pass"
FEATURE = "Add three helper modules a.py, b.py and c.py, each with a describe() function"
PARTS = ("a", "b", "c")


def said(role: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"when": f"ROLE: {role}", "turns": [{"text": "Answer.\n" + fenced(data)}]}


def verdict(complexity: int, path: str, files: list[str], components: int) -> dict[str, Any]:
    return said(
        "analyzer",
        {
            "complexity": complexity,
            "path": path,
            "reasons": ["scripted"],
            "expected_files": files,
            "recommended_components": components,
        },
    )


def plan(components: list[tuple[str, str]]) -> dict[str, Any]:
    return said(
        "planner",
        {
            "status": "COMPLETE",
            "summary": "scripted plan",
            "phases": [
                {
                    "id": "p1",
                    "description": "all",
                    "components": [
                        {"id": cid, "description": f"the {cid} part", "files": [path]}
                        for cid, path in components
                    ],
                }
            ],
            "dependencies": [],
            "estimated_components": len(components),
            "risks": [],
        },
    )


REVIEW = said("reviewer", {"status": "APPROVED", "summary": "fine", "issues": []})


def fix_script() -> list[dict[str, Any]]:
    return [
        verdict(2, "simple", ["calc.py"], 1),
        plan([("calc", "calc.py")]),
        {
            "when": "ROLE: implementer",
            "turns": [
                read_turn("calc.py"),
                {
                    "tool_use": {
                        "name": "Write",
                        "input": {"file_path": "calc.py", "content": CALC_FIXED},
                    }
                },
                {"text": "Done.\n" + fenced(implementation("add and multiply"))},
            ],
        },
        REVIEW,
    ]


def feature_script() -> list[dict[str, Any]]:
    parts = [(p, f"{p}.py") for p in PARTS]
    writers = [
        {
            "when": f"one component of the plan: '{cid}'",
            "turns": [
                {
                    "tool_use": {
                        "name": "Write",
                        "input": {
                            "file_path": path,
                            "content": f"def describe():\n    return '{cid}'\n",
                        },
                    }
                },
                {
                    "text": "Done.\n"
                    + fenced({**implementation(cid), "files_created": [path], "files_modified": []})
                },
            ],
        }
        for cid, path in parts
    ]
    return [verdict(5, "planned", [p for _, p in parts], 3), plan(parts), *writers, REVIEW]


def measure(
    base: Path, name: str, task: str, script: list[dict[str, Any]], depth: str
) -> dict[str, Any]:
    repo = make_demo_repo(base / f"{name}-{depth}")
    if name == "feature":  # the calculator done already: the feature's gate passes on its own
        (repo / "calc.py").write_text(CALC_FIXED)
        git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b"]
        process.run([*git, "commit", "-qam", "calc done"])
    verbose = bool(os.environ.get("BENCH_VERBOSE"))  # every request on stderr
    with ScriptedModelServer(load_script({"conversations": script}), verbose=verbose) as server:
        write_project_config(repo, server.url)
        started = time.monotonic()
        wf = tasks.start_task(task, repo, cli="claude", depth=depth)  # type: ignore[arg-type]
        elapsed = time.monotonic() - started
        answered = [r for r in server.requests if r.kind in ("scripted", "default")]
    conversations = {r.conversation for r in answered if r.conversation is not None}
    conversations |= {-1 - i for i, r in enumerate(answered) if r.kind == "default" and r.turn == 0}
    models = sorted({str(r.body.get("model")) for r in answered})
    return {
        "task": name,
        "depth": depth,
        "path": (wf.context.get("depth") or {}).get("path") or "planned",
        "status": wf.status,
        "conversations": len(conversations),
        "request_kb": sum(len(json.dumps(r.body)) for r in answered) / 1024,
        "models": ", ".join(m.removeprefix("claude-") for m in models),
        "wall_s": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--only", choices=["simple-fix", "feature"])
    args = parser.parse_args()
    runs = [
        ("simple-fix", FIX, fix_script, ["auto", "simple", "planned"]),
        ("feature", FEATURE, feature_script, ["auto", "planned"]),
    ]
    with tempfile.TemporaryDirectory(prefix="bench-depth-") as tmp:
        base = Path(tmp)
        os.environ["SUPERVISOR_USER_DIR"] = str(base / "user")
        os.environ.setdefault("ANTHROPIC_API_KEY", "bench-key-not-a-secret")
        rows = [
            measure(base, name, task, make(), depth)
            for name, task, make, depths in runs
            if args.only in (None, name)
            for depth in depths
        ]
    table = Table(title=f"adaptive depth (load average {os.getloadavg()[0]:.1f})")
    for column in (
        "task",
        "--depth",
        "path",
        "status",
        "conversations",
        "request KB",
        "models",
        "wall s",
    ):
        table.add_column(column)
    for r in rows:
        table.add_row(
            r["task"],
            r["depth"],
            r["path"],
            r["status"],
            str(r["conversations"]),
            f"{r['request_kb']:.0f}",
            r["models"],
            f"{r['wall_s']:.1f}",
        )
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
