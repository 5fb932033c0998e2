"""Gate failures no worker can fix: a command that does not exist, a gate that fails the same way
on a candidate the worker had nothing to change in, the project's tests out of disk space. Each
goes to a person (the configuration, or the machine, is at fault), never back to the worker as
feedback."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from supervisor.core import host_faults
from supervisor.core.errors import ConfigError, StepFailedError

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.core.errors import DiskFullError
    from supervisor.gates.run import GateResult

# What a shell or make prints when the command itself is missing, not when the code is wrong.
_MISSING = (
    re.compile(r"No rule to make target ['`‘]?([^'’\s]+)"),
    re.compile(r"(?:^|\n)(?:/bin/)?(?:ba|da)?sh: (?:\d+: )?([^:\n]+): (?:command )?not found"),
    re.compile(r"exec: \"?([^\":\s]+)\"?: executable file not found"),
)


def missing_command(result: GateResult) -> str | None:
    """What is missing, when the gate failed because its command does not exist (exit 127, or
    make's "No rule to make target"); None for an ordinary failure."""
    for pattern in _MISSING:
        found = pattern.search(result.output)
        if found:
            return found.group(1)
    if result.exit_code in (126, 127):
        return f"the command (exit {result.exit_code})"
    return None


# What a program prints when a write finds no space: the C library's words (any case: Docker
# says them in lower case), Python's errno, Node's code.
_NO_SPACE = re.compile(
    r"no space left on device|disk quota exceeded|\[Errno 28\]|\bENOSPC\b", re.IGNORECASE
)


def disk_full(result: GateResult, worktree: Path, wf_id: int) -> DiskFullError | None:
    """The machine's fault, when a failed gate says a write found no space and the host reads
    the file system of the gate's worktree (the folder its container writes) as full; None
    otherwise, the failure going to the worker as any other.

    The output is the candidate's code speaking, which may print anything: on its own it
    decides nothing, and a test that prints the words on a disk with room is feedback as
    usual. Nor can the words pass anything: the gate failed either way, and a recognised full
    disk stops the task for a person (who frees space and resumes, the gate running again),
    where an unrecognised one would have sent the output to the implementer."""
    if result.passed or not _NO_SPACE.search(result.output):
        return None
    if not host_faults.out_of_space(worktree):
        return None
    return host_faults.disk_full_error(worktree, wf_id)


def missing_command_error(
    gate: str, command: str, what: str, output: str, wf_id: int
) -> ConfigError:
    return ConfigError(
        f"The '{gate}' gate cannot run: `{command}` needs {what}, which does not exist in the "
        f"sandbox image. This is a configuration problem, not the worker's. Output:\n"
        f"{output[-1500:]}",
        f"Set a gate command that exists in the project (`gates.{gate}` in "
        ".supervisor/config.yaml, see `supervisor config show`), then "
        f"`supervisor resume {wf_id}` runs the gate again.",
    )


def gate_problem_error(
    gate: str, command: str, tree: str, output: str, wf_id: int
) -> StepFailedError:
    return StepFailedError(
        f"The '{gate}' gate (`{command}`) fails again on the unchanged candidate (tree "
        f"{tree[:12]}), and the worker, given its output, changed nothing: this is a gate "
        "problem (its command or its environment), or one the worker cannot fix, not a "
        f"retry's worth. Its output:\n{output[-2000:]}",
        f"Check the gate command and what it needs (`supervisor config show`, gates.{gate}), "
        f"fix it, then `supervisor resume {wf_id}` re-runs the gate on the current candidate "
        "first.",
    )
