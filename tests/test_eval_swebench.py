"""SWE-bench instances through the eval runner, judged by SWE-bench's own harness (issue 56).

No SWE-bench image can be fetched here, so the spec makes an instance of its own in SWE-bench's
dataset format (SWE-bench 5: the instance names its image, its eval script and its log parser):
the suite's Python task at its base commit in `/testbed` of a local image. The supervisor copies
the repository out of the image, runs the problem statement with the scripted honest worker (the
real claude in the real sandbox, the real gates), and writes the task branch's change as the
prediction; then the real `swebench` harness (its own venv, scripts/setup-evals.sh) applies it in
the image, runs the instance's tests and reports it resolved.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import missing, require_sandbox

from supervisor.evals import scripted, suite, swebench

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[1]
PYTHON = Path(os.environ.get("SUPERVISOR_SWEBENCH_VENV", ROOT / ".cache" / "swebench-venv")) / (
    "bin/python"
)
EVAL_SCRIPT = """#!/bin/bash
set -uxo pipefail
cd /testbed
echo '>>>>> Start Test Output'
python3 -m unittest -v
echo '>>>>> End Test Output'
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[tuple[suite.EvalTask, Path]]:
    """An instance image (the task's base in /testbed, as SWE-bench's images hold it) and the
    instance file naming it; the image is removed afterwards."""
    task = suite.tasks(["python-temperature"])[0]
    testbed = tmp_path / "image" / "testbed"
    for name, text in task.files_of("normal").items():
        (testbed / name).parent.mkdir(parents=True, exist_ok=True)
        (testbed / name).write_text(text)
    git(testbed, "init", "-q", "-b", "main")
    git(testbed, "add", "-A")
    git(testbed, "commit", "-q", "-m", "base")
    (tmp_path / "image" / "Dockerfile").write_text(
        "FROM supervisor-sandbox:latest\nUSER root\nCOPY testbed /testbed\nWORKDIR /testbed\n"
    )
    image = f"sweb.eval.x86_64.demo__temperature-1:{uuid.uuid4().hex[:12]}"
    subprocess.run(["docker", "build", "-q", "-t", image, str(tmp_path / "image")], check=True)
    names = ("test_freezing", "test_boiling")
    tests = [f"{t} (test_temperature.TemperatureTest.{t})" for t in names]
    row = {
        "instance_id": "demo__temperature-1", "repo": "demo/temperature", "version": "1",
        "base_commit": git(testbed, "rev-parse", "HEAD"), "problem_statement": task.task,
        "image": image, "FAIL_TO_PASS": tests, "PASS_TO_PASS": [],
        "log_parser": "parse_log_django", "eval_type": "pass_and_fail",
        "eval_script": EVAL_SCRIPT,
    }  # fmt: skip
    path = tmp_path / "instances.json"
    path.write_text(json.dumps([row]))
    yield task, path
    subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=False)


def test_an_instance_s_prediction_is_judged_resolved_by_swe_bench_s_harness(
    tmp_path: Path, serve: Any, api_keys: None, instance: Any
) -> None:
    require_sandbox()
    if not PYTHON.is_file():
        missing(f"SWE-bench's harness not installed at {PYTHON} (run scripts/setup-evals.sh)")
    task, path = instance
    server = serve(*scripted.script(task, "normal", "honest")["conversations"])
    workdir = tmp_path / "runs"
    workdir.mkdir()

    results, predictions = swebench.run_instances(
        swebench.load_instances(path), workdir, cli="claude", template="_base",
        test="make test", worker="honest", base_url=server.url,
    )  # fmt: skip

    assert [r.outcome for r in results] == ["patched"]  # a change on the branch, not judged yet
    prediction = json.loads(predictions.read_text())
    assert prediction["instance_id"] == "demo__temperature-1"
    assert "+    return c * 9 / 5 + 32" in prediction["model_patch"]
    assert ".supervisor" not in prediction["model_patch"]

    report = swebench.judge(results, path, predictions, str(PYTHON), "spec")

    assert json.loads(report.read_text())["resolved_ids"] == ["demo__temperature-1"]
    assert [r.outcome for r in results] == ["resolved"]
