"""How long a failover takes: from the rate-limit answer to the fallback worker's first request.

    .venv/bin/python benchmarks/failover_handover.py [runs]

Each run is the scenario of tests/test_failover_e2e.py on the real parts: the real `claude` in the
real sandbox is told by the scripted model API that it is rate-limited for two hours; its role
lists `cli: [claude, codex]`, so the step runs again on the real `codex`. The figure is the time
between the two requests as the scripted API logged them (what a user waits instead of the two
hours): claude's exit, its container and worktree removed, the engine's decision, a new worktree,
the context pack, codex's container start and its first request. The target is below 15 s on a
quiet two-core machine; the load average is printed with each run.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

TARGET_S = 15.0
WORKFLOW = (
    "workflow:\n  initial_step: implement\n  steps:\n"
    "    implement: {role: implementer, next: test}\n"
    "    test: {gate: test, next: commit, on_fail: implement}\n"
    "    commit: {action: commit}\n"
)


def one_run(base: Path) -> float:
    from e2e_support import GOOD_CALC, implementer, new_repo, write_workflow

    from supervisor.fakeapi import ScriptedModelServer, anthropic, load_script, openai
    from supervisor.lifecycle import tasks

    limited = {"status": 429, "message": "rate limited, try again in 7200 seconds"}
    first = {"when": "ROLE: implementer", "turns": [{"error": {**limited, "retry_after": 7200}}]}
    script = load_script({"conversations": [first, implementer(GOOD_CALC)]})
    with ScriptedModelServer(script) as server:
        repo = new_repo(base, server.url, f"  codex: {{base_url: '{server.url}/v1'}}\n")
        role = repo / ".supervisor" / "roles" / "implementer.yaml"
        role.parent.mkdir(parents=True, exist_ok=True)
        role.write_text("extends: implementer\ncli: [claude, codex]\n")
        write_workflow(repo, WORKFLOW)
        wf = tasks.start_task("Implement add and multiply", repo)
        assert wf.status == "completed", wf.status
        asked = server.requests
    model_turns = [r for r in asked if r.kind == "scripted"]
    claude = [r.at for r in model_turns if anthropic.handles(r.path.split("?")[0])]
    codex = [r.at for r in model_turns if openai.handles(r.path.split("?")[0])]
    return min(codex) - max(claude)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    samples = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SUPERVISOR_USER_DIR"] = str(Path(tmp) / "user")
        for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
            os.environ.setdefault(key, "bench-key")
        for i in range(runs):
            took = one_run(Path(tmp) / f"run{i}")
            samples.append(took)
            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"run {i + 1}: rate-limit answer -> codex's first request {took:.2f} s", end="")
            print(f" (load {load})")
    median = statistics.median(samples)
    verdict = "ok" if median < TARGET_S else "SLOWER THAN TARGET"
    print(f"failover hand-over, median of {runs}: {median:.2f} s", end="")
    print(f" (target < {TARGET_S:.0f} s): {verdict}")


if __name__ == "__main__":
    main()
