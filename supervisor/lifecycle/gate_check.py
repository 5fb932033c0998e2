"""`supervisor init` proposes only gates that pass on the untouched project.

A detected command can still be wrong for a project (a lint rule the upstream code breaks, a test
runner that needs a service), and a gate that fails before any change blames every worker for it.
So init builds the project image and runs each detected gate once, offline, on a worktree of HEAD,
exactly as a task's gate would, and says which pass. A gate whose command cannot run (not found,
no such make target or script) is left out, and so is a failing lint or type check (untouched
code that fails it would fail every task); a failing `test` gate is kept with a warning, since
making failing tests pass is often the very task.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from supervisor.core import trustmap
from supervisor.core.errors import SupervisorError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

MISSING = re.compile(
    r"(: not found$|command not found|No rule to make target|Missing script|ERR_PNPM_NO_SCRIPT"
    r"|No module named pytest)",
    re.M,
)


@dataclass(frozen=True)
class GateCheck:
    passed: bool
    summary: str
    checked: bool = True
    """False when the gate could not run (no Docker, the image does not build): unverified."""
    runnable: bool = True
    """False when the command itself is missing (exit 126/127): never worth writing."""
    hint: str = ""
    """For a gate that could not run: how to make it run."""

    def keep(self, gate: str) -> bool:
        """Whether init writes this gate into the config."""
        if not self.checked or self.passed:
            return True
        return self.runnable and gate == "test"


def check_gates(
    repo: Path,
    gates: dict[str, str],
    on_output: Callable[[str], None] | None = None,
    on_gate: Callable[[str, GateCheck | None], None] | None = None,
) -> dict[str, GateCheck]:
    """Each gate's result on HEAD in the project image; every gate unverified (not passed) with
    the reason and its fix when the image cannot be built or Docker is not there. `on_output`
    hears the image build's log, `on_gate(name, None)` when a gate starts and
    `on_gate(name, check)` when it ends: init's progress."""
    from supervisor.core import owners
    from supervisor.gates.run import run_gate
    from supervisor.lifecycle import image_commands
    from supervisor.lifecycle import opening as projects
    from supervisor.sandbox.docker import LABEL_PROBE, DockerSandbox, repo_label

    if not gates:
        return {}
    try:
        project = projects.open_project(repo)
        dockerfile = trustmap.repo_path(project.root, trustmap.DOCKERFILE, trustmap.NEEDS_TRUST)
        tag = (
            image_commands.sandbox_build(repo, on_output=on_output)[0]
            if dockerfile.is_file()
            else None
        )
        chosen = project.settings.sandbox
        sandbox = DockerSandbox(chosen.image, chosen.egress_network, runtime=chosen.runtime)
    except SupervisorError as e:
        reason = f"not checked: {e.message.splitlines()[0]}"
        return {name: GateCheck(False, reason, checked=False, hint=e.hint) for name in gates}
    results: dict[str, GateCheck] = {}
    # Owned like a preflight probe (no task yet): a later start, resume or abandon removes the
    # container and run folder of an `init` killed meanwhile (project.remove_dead_probes).
    labels = {
        "supervisor.repo": repo_label(project.root),
        "supervisor.init-check": "1",
        LABEL_PROBE: owners.this_process(),
    }
    try:
        with image_commands.head_tree(project) as tree:
            for name, command in gates.items():
                if on_gate is not None:
                    on_gate(name, None)
                try:
                    result = run_gate(
                        sandbox, name, command, tree, project.settings.limits, labels, image=tag
                    )
                except SupervisorError as e:
                    reason = f"not checked: {e.message.splitlines()[0]}"
                    results[name] = GateCheck(False, reason, checked=False, hint=e.hint)
                else:
                    results[name] = (
                        GateCheck(True, f"passed in {result.duration:.0f} s")
                        if result.passed
                        else failed(result.exit_code, result.output)
                    )
                if on_gate is not None:
                    on_gate(name, results[name])
    finally:
        sandbox.close()
    return results


def _runnable(exit_code: int, output: str) -> bool:
    """False when the command (or the tool a script calls) does not exist: the shell's 126/127,
    or a package manager's wrapper reporting it with exit 1."""
    return exit_code not in (126, 127) and not MISSING.search(output[-2000:])


def failed(exit_code: int, output: str) -> GateCheck:
    """A failing gate's reason is the runner's own summary of the failing tests, not the last
    line of its output (supervisor/gates/failure_summary.py)."""
    from supervisor.gates.failure_summary import summarize

    return GateCheck(
        False, f"exit {exit_code}: {summarize(output)}", runnable=_runnable(exit_code, output)
    )
