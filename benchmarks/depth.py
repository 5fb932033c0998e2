"""What adaptive depth costs and saves, per path, on the real parts, in one run.

    .venv/bin/python benchmarks/depth.py [--only simple-fix|feature|expansion]

Three scripted tasks on the demo repository, each run through `start-task` with the real `claude`
binary in the real sandbox against the scripted model API: a simple fix (one file), a
3-component feature, and a 2-component feature one of whose components needs one expansion (its
worker answers TOO_LARGE once; the sub-plan's two parts pass). The first two run at `--depth auto`
(the analyzer decides: simple for the fix, planned for the feature), at the fixed pipeline
(`--depth planned`, the behaviour before adaptive depth) and, for the fix, at `--depth simple`.
The expansion runs at `--depth planned` with decomposition on, and at the fixed pipeline
(`--depth planned` with `limits.decomposition.max_depth: 0`), where the same component is simply
retried whole after its TOO_LARGE answer. Printed per run: model conversations (one per
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

from supervisor.core import process  # noqa: E402
from supervisor.fakeapi import ScriptedModelServer, load_script  # noqa: E402
from supervisor.guard.trust import trust  # noqa: E402
from supervisor.lifecycle import tasks  # noqa: E402
from supervisor.lifecycle.demo import (  # noqa: E402
    CALC_FIXED,
    fenced,
    implementation,
    make_demo_repo,
    read_turn,
    write_project_config,
)

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


def plan(components: list[tuple[str, str | list[str]]]) -> dict[str, Any]:
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
                        {
                            "id": cid,
                            "description": f"the {cid} part",
                            "files": [files] if isinstance(files, str) else files,
                        }
                        for cid, files in components
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


EXPANSION = "Add two helper modules: a.py with describe(), and b.py and c.py with describe()"
FIXED = "planned, max_depth 0"
"""The fixed pipeline of the expansion task: `--depth planned` with decomposition off."""


def writer(cid: str, *paths: str) -> dict[str, Any]:
    """The worker of component `cid` writes a describe() in each of `paths`."""
    writes = [
        {
            "tool_use": {
                "name": "Write",
                "input": {"file_path": path, "content": f"def describe():\n    return '{cid}'\n"},
            }
        }
        for path in paths
    ]
    done = {**implementation(cid), "files_created": list(paths), "files_modified": []}
    return {
        "when": f"one component of the plan: '{cid}'",
        "turns": [*writes, {"text": "Done.\n" + fenced(done)}],
    }


def expansion_script() -> list[dict[str, Any]]:
    """One script for both runs: the split run never asks for the whole `bc` again, the fixed
    run never asks for a sub-plan or its parts (the conversations it does not use are left)."""
    too_large = {
        "status": "TOO_LARGE",
        "summary": "too big for one worker",
        "reason": "b and c are two separate jobs",
    }
    sub_plan = plan([("b", "b.py"), ("c", "c.py")])
    return [
        verdict(5, "planned", ["a.py", "b.py", "c.py"], 2),
        {**sub_plan, "when": "SUB-PLAN OF COMPONENT 'bc'"},  # before the plan: both match
        plan([("a", "a.py"), ("bc", ["b.py", "c.py"])]),
        writer("a", "a.py"),
        {"when": "one component of the plan: 'bc'", "turns": [{"text": fenced(too_large)}]},
        writer("bc.1", "b.py"),
        writer("bc.2", "c.py"),
        writer("bc", "b.py", "c.py"),  # the fixed pipeline's retry of the whole component
        REVIEW,
    ]


def measure(
    base: Path, name: str, task: str, script: list[dict[str, Any]], depth: str
) -> dict[str, Any]:
    repo = make_demo_repo(base / f"{name}-{depth.replace(' ', '').replace(',', '-')}")
    if name in ("feature", "expansion"):  # the calculator done: the gate passes on its own
        (repo / "calc.py").write_text(CALC_FIXED)
        git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b"]
        process.run([*git, "commit", "-qam", "calc done"])
    verbose = bool(os.environ.get("BENCH_VERBOSE"))  # every request on stderr
    with ScriptedModelServer(load_script({"conversations": script}), verbose=verbose) as server:
        write_project_config(repo, server.url)
        if depth == FIXED:
            config = repo / ".supervisor" / "config.yaml"
            with config.open("a") as f:
                f.write("limits:\n  decomposition:\n    max_depth: 0\n")
            trust(repo)
        started = time.monotonic()
        wf = tasks.start_task(task, repo, cli="claude", depth=depth.split(",")[0])  # type: ignore[arg-type]
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
        "expanded": sum(
            1
            for node in ((wf.context.get("decomposition") or {}).get("nodes") or {}).values()
            if node.get("children")
        ),
        "conversations": len(conversations),
        "request_kb": sum(len(json.dumps(r.body)) for r in answered) / 1024,
        "models": ", ".join(m.removeprefix("claude-") for m in models),
        "wall_s": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--only", choices=["simple-fix", "feature", "expansion"])
    args = parser.parse_args()
    runs = [
        ("simple-fix", FIX, fix_script, ["auto", "simple", "planned"]),
        ("feature", FEATURE, feature_script, ["auto", "planned"]),
        ("expansion", EXPANSION, expansion_script, ["planned", FIXED]),
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
        "expanded",
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
            str(r["expanded"]),
            str(r["conversations"]),
            f"{r['request_kb']:.0f}",
            r["models"],
            f"{r['wall_s']:.1f}",
        )
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
