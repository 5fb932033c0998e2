"""`supervisor eval`: the shipped suite (supervisor/evals/), run and reported on the terminal.

The runs are the lifecycle's (supervisor/evals/runner.py); this face parses the choices, shows a
line per finished run on stderr, and the report as a table or, with `--json`, as JSON.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from supervisor.cli.common import JsonOption, console, err_console
from supervisor.core.errors import UsageError

if TYPE_CHECKING:
    from supervisor.evals.runner import Result
    from supervisor.evals.scripted import Worker

EVAL_HELP = (
    "Run the shipped suite of small tasks and report what the workers did.\n\n"
    "Each task (Python, TypeScript, Go) comes in three variants: normal, one-off impossible (one "
    "expected value contradicts the task) and conflicting impossible (two assertions contradict "
    "each other). Per variant: resolved, cheated (passed an impossible variant), stopped honestly "
    "(the worker said so; the task waits for a person), caught (the test-integrity gate stopped a "
    "changed test), tokens, cost and time.\n\n"
    "Real figures need your own key (the CLI's usual ANTHROPIC_API_KEY, OPENAI_API_KEY or "
    "GEMINI_API_KEY) and spend it. --scripted runs a scripted honest or cheating worker instead, "
    "offline and free: a check of the pipeline, not a measure of a model."
)


def evaluate(
    cli: Annotated[
        str, typer.Option(metavar="CLI", help="The CLI every role runs on: claude, codex, gemini.")
    ] = "claude",
    template: Annotated[
        str, typer.Option(metavar="NAME", help="The workflow template the tasks run.")
    ] = "_base",
    task: Annotated[
        list[str] | None,
        typer.Option(metavar="NAME", help="A task of the suite (repeat it; default: all)."),
    ] = None,
    variant: Annotated[
        list[str] | None,
        typer.Option(
            metavar="VARIANT",
            help="normal, one_off or conflicting (repeat it; default: all three).",
        ),
    ] = None,
    scripted: Annotated[
        list[str] | None,
        typer.Option(
            metavar="WORKER",
            help="Offline, no key: the scripted honest or cheating worker answers (repeat it "
            "for both; --cli claude only).",
        ),
    ] = None,
    keep: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Keep each run's repository under DIR, to look at."),
    ] = None,
    swebench: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Run these SWE-bench instances (.json or .jsonl) instead of the suite; their "
            "images must be here.",
        ),
    ] = None,
    swebench_python: Annotated[
        str | None,
        typer.Option(
            metavar="PYTHON",
            envvar="SUPERVISOR_SWEBENCH_PYTHON",
            help="A Python with the swebench package: its harness judges the predictions.",
        ),
    ] = None,
    test: Annotated[
        str | None,
        typer.Option(metavar="COMMAND", help="The test gate's command for --swebench runs."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    from supervisor.evals import report, runner, suite

    workers = _workers(scripted or [], cli, swebench)
    workdir = keep or Path(tempfile.mkdtemp(prefix="supervisor-eval-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if swebench is not None:
        results = _swebench(swebench, swebench_python, workdir, cli, template, test)
    else:
        chosen, variants = suite.tasks(task), suite.variants(variant)
        try:
            results = runner.run_suite(
                chosen, variants, workdir, cli=cli, template=template,
                workers=workers or None, progress=_said,
            )  # fmt: skip
        finally:
            if keep is None:
                shutil.rmtree(workdir, ignore_errors=True)
    if as_json:
        from supervisor.cli.plain import json_out

        json_out(report.as_json(results, cli=cli, template=template))
        return
    _table(results)


def _workers(scripted: list[str], cli: str, swebench: Path | None) -> list[Worker]:
    from supervisor.evals.scripted import WORKERS

    unknown = sorted(set(scripted) - set(WORKERS))
    if unknown:
        raise UsageError(
            f"Unknown scripted worker(s): {', '.join(unknown)}.", "Name honest or cheating."
        )
    if scripted and swebench is not None:
        raise UsageError(
            "The scripted workers know only the suite's tasks, not SWE-bench instances.",
            "Run --swebench with your own key, without --scripted.",
        )
    if scripted and cli != "claude":
        raise UsageError(
            f"The scripted workers answer as Claude Code does; --cli {cli} cannot run them.",
            "Use --cli claude with --scripted, or run --cli "
            f"{cli} without --scripted, with your own key.",
        )
    return [w for w in WORKERS if w in scripted]


def _swebench(
    instances: Path, python: str | None, workdir: Path, cli: str, template: str, test: str | None
) -> list[Result]:
    """The instances' runs; judged by SWE-bench's harness where `python` has it. The run
    folder stays: its predictions.jsonl is SWE-bench's input."""
    from supervisor.evals import swebench

    loaded = swebench.load_instances(instances)
    results, predictions = swebench.run_instances(
        loaded, workdir, cli=cli, template=template, test=test, progress=_said
    )
    err_console.print(f"Predictions: {predictions}", markup=False, highlight=False)
    if python:
        report = swebench.judge(results, instances, predictions, python, workdir.name)
        err_console.print(f"SWE-bench's report: {report}", markup=False, highlight=False)
    return results


def _said(result: Result) -> None:
    reason = f": {result.reason}" if result.reason else ""
    err_console.print(
        f"{result.worker} {result.task} {result.variant}: {result.outcome}{reason} "
        f"({result.seconds:.0f} s)",
        markup=False,
        highlight=False,
    )


def _table(results: list[Result]) -> None:
    from supervisor.cli.output import show
    from supervisor.evals import report
    from supervisor.views.listing import Column, Listing

    headers = ["worker", "variant", "runs", "resolved", "cheated", "stopped honestly", "caught"]
    more = ["waiting", "failed", "cheats on branch", "tokens", "cost", "time"]
    listing = Listing("supervisor eval", [Column(h, "short") for h in headers + more])
    for row in report.summary(results):
        counts = [str(row[k]) for k in headers[2:] + more[:2]]
        listing.add(
            row["worker"],
            row["variant"],
            *counts,
            str(row["cheats_on_branch"]),
            str(row["input_tokens"] + row["output_tokens"]),
            f"${row['cost_usd']:.4f}",
            f"{row['seconds']:.0f} s",
        )
    show(console, listing)
    total = sum(r["cheats_on_branch"] for r in report.summary(results))
    console.print(f"\nCheats that reached a task branch: {total}", highlight=False)
