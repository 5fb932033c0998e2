"""SWE-bench instances through the same runner, judged by the `swebench` package's harness.

Where the user has an instance's image (SWE-bench's `sweb.eval.*` images hold the repository at
its base commit in `/testbed`), the repository is copied out of the image into a local git
repository, the instance's problem statement runs there as a task (`start-task --yes`: the CLI
and template chosen, the supervisor's sandbox and gates), and the task branch's change becomes the
instance's prediction (`model_patch`, in SWE-bench's predictions format). Then SWE-bench's own
harness (`python -m swebench.harness.run_evaluation`, run with the Python that has `swebench`)
applies each prediction in the instance's image and runs the instance's tests: resolved or
unresolved is the harness's word. Without a harness the predictions are written and the runs
count as `patched` (a change reached the branch, not judged) or as the suite's outcomes
otherwise (stopped honestly, caught, waiting, failed).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.core import process
from supervisor.core.errors import ToolMissingError, UsageError
from supervisor.evals.runner import Named, Result, run_in, write_config
from supervisor.lifecycle.opening import workflows

if TYPE_CHECKING:
    from collections.abc import Callable

MODEL = "supervisor"
"""The predictions' `model_name_or_path`, and so the harness report's file name."""
TESTBED = "/testbed"


def load_instances(path: Path) -> list[dict[str, Any]]:
    """Instances from a `.json` list or a `.jsonl` file, in SWE-bench's dataset format."""
    try:
        text = path.read_text()
        rows = (
            [json.loads(line) for line in text.splitlines() if line.strip()]
            if path.suffix == ".jsonl"
            else json.loads(text)
        )
    except (OSError, ValueError) as e:
        raise UsageError(
            f"--swebench {path}: cannot read SWE-bench instances ({e}).",
            "Give a .json list or a .jsonl file of instances (instance_id, problem_statement, "
            "image or the instance's sweb.eval image pulled).",
        ) from e
    bad = [r for r in rows if not {"instance_id", "problem_statement"} <= set(r)]
    if not isinstance(rows, list) or bad:
        raise UsageError(
            f"--swebench {path}: every instance needs instance_id and problem_statement.",
            "Export the instances from the SWE-bench dataset as they are.",
        )
    return rows


def image_of(instance: dict[str, Any]) -> str:
    """The instance's image: the dataset's own `image` field (SWE-bench 5), else the name
    SWE-bench's harness builds for it (`sweb.eval.x86_64.<id>:latest`)."""
    named = instance.get("image")
    return str(named) if named else f"sweb.eval.x86_64.{instance['instance_id']}:latest".lower()


def checkout(image: str, dest: Path) -> Path:
    """The image's /testbed as a local git repository at its commit (the instance's base)."""
    made = process.run(["docker", "create", image], check=False)
    if made.returncode != 0:
        raise ToolMissingError(
            f"The SWE-bench image {image} is not here: {made.stderr.strip()[:300]}",
            "Pull or build the instance images first (SWE-bench's harness builds them), or "
            "name the image in the instance's `image` field.",
        )
    container = made.stdout.strip()
    try:
        process.run(["docker", "cp", f"{container}:{TESTBED}", str(dest)])
    finally:
        process.run(["docker", "rm", "-f", container], check=False)
    git = ["git", "-C", str(dest), "-c", "user.name=eval", "-c", "user.email=eval@localhost"]
    if not (dest / ".git").is_dir():  # a testbed without history: its files are the base
        process.run([*git, "init", "-q", "-b", "main"])
        process.run([*git, "add", "-A"])
        process.run([*git, "commit", "-q", "--allow-empty", "-m", "The instance's base"])
    return dest


def patch_of(repo: Path, result: Result) -> str:
    """The task branch's change from its base, as the predictions' `model_patch`."""
    found = workflows(repo)
    if not result.on_branch or not found:
        return ""
    wf = found[-1]
    return process.run(["git", "-C", str(repo), "diff", wf.base_sha, wf.task_branch]).stdout


def run_instances(
    instances: list[dict[str, Any]],
    workdir: Path,
    *,
    cli: str,
    template: str,
    test: str | None,
    worker: str = "own keys",
    base_url: str | None = None,
    progress: Callable[[Result], None] | None = None,
) -> tuple[list[Result], Path]:
    """Each instance as a task; the predictions file they make (SWE-bench's format)."""
    results: list[Result] = []
    predictions = workdir / "predictions.jsonl"
    with predictions.open("w") as out:
        for instance in instances:
            repo = workdir / str(instance["instance_id"]).replace("/", "_")
            if repo.exists():
                shutil.rmtree(repo)
            checkout(image_of(instance), repo)
            write_config(repo, test=test, template=template, cli=cli, base_url=base_url)
            named = Named(str(instance["instance_id"]), "swebench", "swebench", worker)
            result = run_in(repo, str(instance["problem_statement"]), named, cli=cli)
            if result.outcome == "resolved":
                result.outcome = "patched"  # a change on the branch; the harness judges it
            patch = patch_of(repo, result)
            out.write(
                json.dumps(
                    {
                        "instance_id": instance["instance_id"],
                        "model_name_or_path": MODEL,
                        "model_patch": patch,
                    }
                )
                + "\n"
            )
            results.append(result)
            if progress is not None:
                progress(result)
    return results, predictions


def judge(
    results: list[Result], dataset: Path, predictions: Path, python: str, run_id: str
) -> Path:
    """SWE-bench's harness on the predictions; each patched run becomes resolved or
    unresolved by its report. Returns the report's path."""
    argv = [
        python, "-m", "swebench.harness.run_evaluation", "--dataset_name", str(dataset),
        "--predictions_path", str(predictions), "--run_id", run_id, "--max_workers", "1",
        "--report_dir", str(predictions.parent),
    ]  # fmt: skip
    # An instance's tests may take a while (the harness's own timeout is 30 minutes each).
    done = process.run(argv, cwd=predictions.parent, check=False, timeout=None)
    report = predictions.parent / f"{MODEL}.{run_id}.json"
    if done.returncode != 0 or not report.is_file():
        raise ToolMissingError(
            f"SWE-bench's harness did not finish (exit {done.returncode}): "
            f"{(done.stderr or done.stdout).strip()[-1500:]}",
            f"Check that {python} has the `swebench` package and that the instance images "
            f"are here; the predictions are in {predictions}.",
        )
    resolved = set(json.loads(report.read_text()).get("resolved_ids") or [])
    for result in results:
        if result.outcome == "patched":
            result.outcome = "resolved" if result.task in resolved else "unresolved"
    return report
