"""What gating per affected project saves on a monorepo, on the real parts, in one run.

    .venv/bin/python benchmarks/monorepo.py [--files 2000] [--work N] [--skip-gates|...]

A generated monorepo of 8 Python packages (a uv workspace: shared types, 3 libraries, 4 apps;
2,000 files in all, each package with its own stdlib-unittest suite (20 test files, each also
doing `--work` iterations of arithmetic: ~2 s of suite per package by default, so that a gate is
more than a container's start) and its own gate, run from its directory), committed with real
git. Gate time, as the median of `--repeat` runs, each gate
in the real no-network sandbox on a real worktree of the commit (supervisor/gates/run.py):

- a change to one app: the projects `ProjectMap.affected` picks (that app only), run as the
  supervisor runs them (steps/project_gate.py: side by side, PARALLEL at a time);
- every package's gates: the 8 projects, the same way (what a change to the shared types, or
  to a shared path, costs);
- the whole suite: one container at the root running every package's tests in turn (what a
  one-project configuration runs for every candidate).

Then the makespan of a scripted feature touching the types and 2 apps (3 components, the real
`claude` binary in the real sandbox against the scripted model API, `start-task` to the end),
once with the projects configured (the apps' components wait for the types'; the types'
component is gated in all 8 projects, each app's in its own) and once as one project (the 3
components side by side, each gated by the whole suite). Wall times depend on the machine's
load (printed beside them): compare rows of one run only.

Measured on the shared 2-core machine (one run, load average 4-7, real sandbox for everything):
gate time for a change to one app 5.3 s, every package's gates 15.0 s, the whole suite in one
container 18.9 s; makespan of the types + 2 apps feature 38.7 s with projects (10 gate runs,
51 s of gate time) against 72.0 s as one project (3 whole-suite runs, 125 s of gate time, the
three components contending for the 2 cores). With `--work 0` (suites of trivial tests, where a
gate is mostly a container's start) the whole suite wins (1.4 s against 2.0 s for one app) and
so does the one-project makespan (15.1 s against 24.0 s): the apps wait for the types.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from supervisor.core.config import Limits, Settings  # noqa: E402
from supervisor.gates import per_project as project_gates  # noqa: E402
from supervisor.gates.run import run_gate  # noqa: E402
from supervisor.lifecycle.demo import fenced, write_project_config  # noqa: E402
from supervisor.sandbox.docker import DockerSandbox  # noqa: E402
from supervisor.workflow.steps.project_gate import PARALLEL  # noqa: E402
from supervisor.workspace.worktrees import Workspace  # noqa: E402

IMAGE = "supervisor-sandbox:latest"
PACKAGES = {  # name -> (path, depends on)
    "types": ("packages/types", []),
    "lib-a": ("packages/lib-a", ["types"]),
    "lib-b": ("packages/lib-b", ["types"]),
    "lib-c": ("packages/lib-c", ["types"]),
    "app-1": ("apps/app-1", ["lib-a"]),
    "app-2": ("apps/app-2", ["lib-b"]),
    "app-3": ("apps/app-3", ["lib-c"]),
    "app-4": ("apps/app-4", ["lib-a", "lib-b"]),
}
TESTS_PER_PACKAGE = 20


def module_name(project: str) -> str:
    """The package's import name (`types` would shadow the standard library's)."""
    return "shared_types" if project == "types" else project.replace("-", "_")


def closure(project: str) -> list[str]:
    found: list[str] = []
    for dep in PACKAGES[project][1]:
        for name in [*closure(dep), dep]:
            if name not in found:
                found.append(name)
    return found


def gate_command(project: str) -> str:
    here = PACKAGES[project][0]
    up = "/".join(".." for _ in here.split("/"))
    paths = ["src", *(f"{up}/{PACKAGES[d][0]}/src" for d in closure(project))]
    return f"PYTHONPATH={':'.join(paths)} python3 -m unittest discover -s tests -q"


def generate(repo: Path, files: int, work: int = 1_000_000) -> None:
    """8 packages of `files` files in all: modules, and tests that import and call them, each
    test file also doing `work` iterations of arithmetic (a suite's own time: ~0.1 s per file
    per million on this machine's cores, ~2 s per package by default)."""
    per = files // len(PACKAGES)
    for project, (path, deps) in PACKAGES.items():
        mod = module_name(project)
        src = repo / path / "src" / mod
        tests = repo / path / "tests"
        src.mkdir(parents=True)
        tests.mkdir(parents=True)
        uses = "\n".join(f"import {module_name(d)}.m000" for d in deps)
        (repo / path / "pyproject.toml").write_text(
            f'[project]\nname = "{project}"\nversion = "0"\n'
            f"dependencies = {[d for d in deps]!r}\n".replace("'", '"')
        )
        (src / "__init__.py").write_text("")
        modules = per - TESTS_PER_PACKAGE - 2
        for i in range(modules):
            (src / f"m{i:03d}.py").write_text(
                f"{uses}\n\n\ndef value_{i}(x: int) -> int:\n"
                f"    return sum(range(x)) + {i}\n\n\nNAME = 'm{i:03d}'\n"
            )
        for t in range(TESTS_PER_PACKAGE):
            calls = "\n".join(
                f"        self.assertEqual(m{i:03d}.value_{i}(200), 19900 + {i})"
                for i in range(t, modules, TESTS_PER_PACKAGE)
            )
            imports = "\n".join(
                f"from {mod} import m{i:03d}" for i in range(t, modules, TESTS_PER_PACKAGE)
            )
            (tests / f"test_{t:02d}.py").write_text(
                f"import unittest\n\n{imports}\n\n\nclass T(unittest.TestCase):\n"
                f"    def test_values(self):\n{calls}\n\n"
                f"    def test_work(self):\n"
                f"        self.assertGreater(sum(i * i for i in range({work})), 0)\n"
            )
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "mono"\nversion = "0"\n\n[tool.uv.workspace]\n'
        'members = ["packages/*", "apps/*"]\n'
    )


def config_text(with_projects: bool) -> str:
    whole = " && ".join(f"(cd {p} && {gate_command(n)})" for n, (p, _) in PACKAGES.items())
    text = f'gates:\n  test: "{whole}"\n'
    if not with_projects:
        return text
    text += "projects:\n"
    for name, (path, _) in PACKAGES.items():
        text += f'  - {{name: {name}, path: {path}, gates: {{test: "{gate_command(name)}"}}}}\n'
    text += "cross_project_dependencies:\n"
    for name, (_, deps) in PACKAGES.items():
        if deps:
            text += f"  {name}: {{depends_on: [{', '.join(deps)}]}}\n"
    return text


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def timed_gates(
    sandbox: DockerSandbox, worktree: Path, commands: list[str], limits: Limits
) -> float:
    """Wall time of `commands` run side by side, PARALLEL at a time, as the supervisor does;
    each must pass."""

    def one(command: str) -> None:
        result = run_gate(sandbox, "bench", command, worktree, limits, {"bench": "monorepo"})
        assert result.passed, result.output[-2000:]

    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, min(PARALLEL, len(commands)))) as pool:
        list(pool.map(one, commands))
    return time.perf_counter() - began


def gate_times(base: Path, files: int, repeat: int, work: int) -> dict[str, Any]:
    repo = base / "gates"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    generate(repo, files, work)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "monorepo")
    count = int(git(repo, "ls-files", "--", ".").count("\n"))
    settings = Settings.model_validate(_yaml(config_text(True)))
    projects = settings.project_map()
    limits = settings.limits
    changed = ["apps/app-2/src/app_2/m007.py"]
    one_app = project_gates.choose(projects, "test", settings.gates["test"], changed) or []
    every = (
        project_gates.choose(projects, "test", "", ["packages/types/src/shared_types/m000.py"])
        or []
    )
    runs = {
        f"one app ({', '.join(g.project for g in one_app)})": [g.script for g in one_app],
        f"every package's gates ({len(every)} projects)": [g.script for g in every],
        "whole suite (one container at the root)": [settings.gates["test"]],
    }
    ws = Workspace(repo)
    worktree = ws.add_worktree("bench-gates", git(repo, "rev-parse", "HEAD").strip())
    sandbox = DockerSandbox(IMAGE, "supervisor-egress-bench")
    found: dict[str, Any] = {"files": count}
    try:
        for label, commands in runs.items():
            timed_gates(sandbox, worktree, commands, limits)  # warm: page cache, image layers
            times = [timed_gates(sandbox, worktree, commands, limits) for _ in range(repeat)]
            found[label] = statistics.median(times)
    finally:
        sandbox.close()
        ws.remove_worktree(worktree)
    return found


def _yaml(text: str) -> dict[str, Any]:
    import yaml

    data: dict[str, Any] = yaml.safe_load(text)
    return data


WORKFLOW = """workflow:
  initial_step: plan
  steps:
    plan: {role: planner, next: implement}
    implement: {role: implementer, for_each: component, gates: [test], next: commit,
                max_retries: 1}
    commit: {action: commit}
"""
FEATURE = {  # component -> (project, file it adds)
    "types-field": ("types", "packages/types/src/shared_types/extra.py"),
    "app-1-page": ("app-1", "apps/app-1/src/app_1/extra.py"),
    "app-2-page": ("app-2", "apps/app-2/src/app_2/extra.py"),
}


def makespan(base: Path, files: int, work: int, with_projects: bool) -> tuple[float, str]:
    from supervisor.fakeapi import ScriptedModelServer, load_script
    from supervisor.guard.trust import trust
    from supervisor.lifecycle import opening, tasks

    repo = base / ("projects" if with_projects else "single")
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    generate(repo, files, work)
    components = [
        {
            "id": cid,
            "description": cid,
            "files": [path],
            "depends_on": [],
            "project": project if with_projects else None,
        }
        for cid, (project, path) in FEATURE.items()
    ]
    plan = {
        "status": "COMPLETE",
        "phases": [{"id": "p1", "description": "feature", "components": components}],
        "estimated_components": 3,
    }
    conversations: list[dict[str, Any]] = [
        {"when": "ROLE: planner", "turns": [{"text": "Plan:\n" + fenced(plan)}]}
    ]
    for cid, (_, path) in FEATURE.items():
        report = {"status": "SUCCESS", "summary": cid, "files_created": [path]}
        conversations.append(
            {
                "when": f"one component of the plan: '{cid}'",
                "turns": [
                    {
                        "tool_use": {
                            "name": "Write",
                            "input": {"file_path": path, "content": f"EXTRA = {cid!r}\n"},
                        }
                    },
                    {"text": "Done.\n" + fenced(report)},
                ],
            }
        )
    server = ScriptedModelServer(load_script({"conversations": conversations}))
    try:
        write_project_config(repo, server.url)
        with (repo / ".supervisor" / "config.yaml").open("a") as handle:
            handle.write(config_text(with_projects))
        (repo / ".supervisor" / "workflow.yaml").write_text(WORKFLOW)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "monorepo")
        trust(repo)
        began = time.perf_counter()
        wf = tasks.start_task("Add an extra field to the types and show it in two apps", repo)
        took = time.perf_counter() - began
        assert wf.status == "completed", wf.status
        with opening.reading(repo) as store:
            log = store.events(wf.id)
    finally:
        server.close()
    gates = [e for e in log if e.type == "gate"]
    merged = [e.payload["component"] for e in log if e.type == "component_merged"]
    seconds = sum(float(e.payload.get("duration_s") or 0.0) for e in gates)
    counted = sum(e.type == "gate_baseline" for e in log)
    breakdown = (
        f"{len(gates)} gate runs ({seconds:.0f} s of gate time), {counted} base-commit test "
        f"counts; merged in order {', '.join(merged)}"
    )
    return took, breakdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-makespan", action="store_true")
    parser.add_argument("--skip-gates", action="store_true")
    parser.add_argument("--work", type=int, default=1_000_000, help="iterations per test file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-monorepo-") as tmp:
        base = Path(tmp)
        os.environ["SUPERVISOR_USER_DIR"] = str(base / "user")
        os.environ.setdefault("ANTHROPIC_API_KEY", "bench-key-not-a-secret")
        load = os.getloadavg()[0]
        found = {} if args.skip_gates else gate_times(base, args.files, args.repeat, args.work)
        if found:
            print(f"monorepo: 8 packages, {found.pop('files')} files; load average {load:.1f}")
            print(f"gate time, median of {args.repeat} (real sandbox, no network):")
        for label, seconds in found.items():
            print(f"  {label:<48} {seconds:6.2f} s")
        if args.skip_makespan:
            return
        print("makespan of a feature touching types + 2 apps (real claude, real sandbox):")
        for with_projects in (True, False):
            load = os.getloadavg()[0]
            took, breakdown = makespan(base, args.files, args.work, with_projects)
            label = (
                "with projects (ordered, gated per project)"
                if with_projects
                else ("as one project (side by side, whole suite)")
            )
            print(f"  {label:<48} {took:6.1f} s   (load {load:.1f})\n      {breakdown}")


if __name__ == "__main__":
    main()
