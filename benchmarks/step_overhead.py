"""The per-step overhead of any checkout of the supervisor, measured the same way for each, so
that a change's cost is its before/after in one session on one machine:

    git worktree add /tmp/before <old-commit> && ln -s $PWD/node_modules /tmp/before/
    .venv/bin/python benchmarks/step_overhead.py /tmp/before 5
    .venv/bin/python benchmarks/step_overhead.py . 5

Worktree add + remove (1000-file repo), a no-op container run, a 5-file context pack (from the
step's commit where the checkout can, as its engine does), a snapshot with one changed file, and
the median worker step of the demo task with the real `claude`.
"""

from __future__ import annotations

import importlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
REPEAT = int(sys.argv[2]) if len(sys.argv) > 2 else 5


def timed(fn: Callable[[], object]) -> float:
    samples = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    process = importlib.import_module("supervisor.core.process")
    demo = importlib.import_module("supervisor.lifecycle.demo")
    fakeapi = importlib.import_module("supervisor.fakeapi")
    docker_mod = importlib.import_module("supervisor.sandbox.docker")
    workspace = importlib.import_module("supervisor.workspace.worktrees")
    context = importlib.import_module("supervisor.context.assemble")
    roles = importlib.import_module("supervisor.context.roles")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        repo = demo.make_demo_repo(base / "repo")
        (repo / "pkg").mkdir()
        for i in range(1000):
            (repo / "pkg" / f"mod{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
        git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b"]
        process.run([*git, "add", "-A"])
        process.run([*git, "commit", "-qm", "m"])
        ws = workspace.Workspace(repo)
        head = ws.head_commit()
        sandbox = docker_mod.DockerSandbox("supervisor-sandbox:latest", "supervisor-egress-bench")
        counter = iter(range(10_000))
        floor_tree = ws.add_worktree("floor", head)
        implementer = roles.load_role("implementer", None)
        five = [f"pkg/mod{i}.py" for i in range(5)]

        def source() -> Any:
            try:
                treedata = importlib.import_module("supervisor.workspace.treedata")
            except ImportError:  # before isolation: the worktree itself
                return floor_tree
            return treedata.CommitFiles(ws.git_dir, head)

        def cycle() -> None:
            ws.remove_worktree(ws.add_worktree(f"b-{next(counter)}", head))

        def noop() -> None:
            sandbox.run(docker_mod.RunSpec(argv=["true"], worktree=floor_tree))

        def pack() -> None:
            built = context.build_pack(
                source(), implementer, repo=None, prompt_tokens=600, targets=five
            )
            assert len(built.files) >= 5, built.files

        def snapshot() -> float:
            tree = ws.add_worktree(f"s-{next(counter)}", head)
            (tree / "pkg" / "mod1.py").write_text("changed\n")
            started = time.perf_counter()
            assert ws.snapshot(tree, "m")
            seconds = time.perf_counter() - started
            ws.remove_worktree(tree)
            return seconds

        worktree_s, noop_s, pack_s = timed(cycle), timed(noop), timed(pack)
        snap_s = statistics.median(snapshot() for _ in range(REPEAT))
        os.environ.setdefault("ANTHROPIC_API_KEY", "bench-key")
        os.environ["SUPERVISOR_USER_DIR"] = str(base / "user")
        demo_repo = demo.make_demo_repo(base / "demo")
        tasks = importlib.import_module("supervisor.lifecycle.tasks")
        script = fakeapi.load_script(demo.demo_script())
        with fakeapi.ScriptedModelServer(script) as server:
            demo.write_project_config(demo_repo, server.url)
            done = tasks.start_task("Implement add and multiply", demo_repo)
        with tasks.reading(demo_repo) as store:
            steps = [s for s in store.steps(done.id) if s["role"]]
        step_s = statistics.median(
            (s["finished_at"] - s["started_at"]).total_seconds() for s in steps
        )
        sandbox.close()
        total = worktree_s + noop_s + pack_s + snap_s
        print(
            f"{ROOT.name}: worktree add+remove {worktree_s:.3f} | no-op container {noop_s:.3f} | "
            f"pack 5 files {pack_s:.3f} | snapshot {snap_s:.3f} | overhead sum {total:.3f} | "
            f"worker step median {step_s:.3f} ({len(steps)} steps, {done.status})"
        )


if __name__ == "__main__":
    main()
