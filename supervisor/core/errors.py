"""One error hierarchy for everything a user can meet.

Every error carries the cause (the message) and a fix (the hint), and an exit code, so that the CLI
turns any of them into one readable message in one place (`supervisor.cli.app`).
"""

from __future__ import annotations


class SupervisorError(Exception):
    """Root of every error the supervisor raises on purpose."""

    exit_code: int = 1
    default_hint: str = ""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.default_hint

    def __str__(self) -> str:
        return self.message


class ConfigError(SupervisorError, ValueError):
    """A configuration file is missing, does not parse, or fails validation."""

    exit_code = 2


class PackChangedError(ConfigError):
    """An installed role pack's files no longer match the hashes its lock recorded."""

    def __init__(self, message: str, hint: str | None = None, *, pack: str) -> None:
        super().__init__(message, hint)
        self.pack = pack


class UsageError(SupervisorError):
    """A command's arguments cannot be used as given (exit 2, like a parse error)."""

    exit_code = 2


class RepoError(SupervisorError):
    """The target is not a usable git repository."""

    exit_code = 2


class GitError(SupervisorError, RuntimeError):
    """A git command failed."""


class RemoteNotUpdatedError(GitError):
    """The shared remote did not take a step's refs (out of reach, or moved by another host since
    this one fetched them). Nothing of the step was committed: it runs again, after a fresh
    fetch, rather than failing the task."""


class CandidateRefusedError(GitError):
    """A worker's worktree cannot become a candidate (tampered git metadata, a symlink out of the
    repository, over a size limit); `kind` names the event the step fails with."""

    def __init__(self, message: str, hint: str | None = None, *, kind: str) -> None:
        super().__init__(message, hint)
        self.kind = kind


class MergeConflictError(GitError):
    """Two lines of work changed the same lines; both are kept, nothing is half-merged."""

    def __init__(self, message: str, hint: str | None = None, *, files: list[str]) -> None:
        super().__init__(message, hint)
        self.files = files


class ToolMissingError(SupervisorError, FileNotFoundError):
    """An external program the supervisor drives is not installed."""

    exit_code = 3


class ToolFailedError(SupervisorError, RuntimeError):
    """An external program ran and failed."""

    def __init__(
        self, message: str, hint: str | None = None, *, returncode: int = 1, output: str = ""
    ) -> None:
        super().__init__(message, hint)
        self.returncode = returncode
        self.output = output


class CommandTimeoutError(SupervisorError, TimeoutError):
    """An external program or container ran past its time limit."""


class SandboxError(SupervisorError, RuntimeError):
    """The Docker sandbox cannot be used (engine down, image missing, container failure)."""

    exit_code = 3


class EngineUnreachableError(SandboxError):
    """No Docker engine answered when a command first asked: said as such (where it looked, how to
    start one), not as an engine lost under a running step (host_faults.machine_fault)."""


class ToolchainUnavailableError(SandboxError):
    """A toolchain version the project declares (Node, Python, Go, Rust) cannot be had from
    any source reachable here: said before any image is built (supervisor/project/
    toolchain_resolve.py)."""

    def __init__(
        self, message: str, hint: str | None = None, *, tool: str, declarations: tuple[str, ...]
    ) -> None:
        super().__init__(message, hint)
        self.tool = tool
        self.declarations = declarations


class ToolchainMismatchError(SandboxError):
    """The project Dockerfile does not provide a toolchain version the project declares (it
    was written before the declaration changed, or edited): said before the build."""


class CredentialsError(SupervisorError):
    """A worker CLI has no credentials to call its model API."""

    exit_code = 3


class WorkerError(SupervisorError, RuntimeError):
    """A worker CLI ran but did not produce a usable result."""


class ResultTamperedError(WorkerError):
    """What the CLI printed is not what the model API answered (supervisor/workers/witness.py):
    something in the sandbox changed the step's result."""

    default_hint = (
        "Look at the worktree's CLI configuration (.claude/, .gemini/, .codex/, CLAUDE.md, "
        "GEMINI.md, AGENTS.md) and the worker's commands in `supervisor events`; the step's "
        "result was not used."
    )


class ParsingError(WorkerError):
    """The worker's answer holds no JSON block, or the JSON does not match the step's schema."""


class StateError(SupervisorError):
    """The state database refuses the operation (unknown id, wrong status, busy)."""

    exit_code = 2


class StateUnavailableError(StateError):
    """The shared database cannot be reached or used (down, cut off, a wrong password): not a
    fact about the task, so a Temporal activity lets another worker try instead of failing it."""


class AlreadyDecidedError(StateError):
    """The approval a command would decide was decided already (`decision`: approved or
    rejected) and waits for `supervisor resume` to act on it."""

    def __init__(self, message: str, hint: str | None = None, *, decision: str) -> None:
        super().__init__(message, hint)
        self.decision = decision


class WorkflowBusyError(StateError):
    """Another supervisor process is running this task (its task lock is held)."""


class UnknownWorkflowError(StateError, KeyError):
    """No workflow with that id exists in this repository's state database."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self.message


class RunnerUnavailableError(SupervisorError):
    """The Temporal server that runs (or should run) the task cannot be reached."""


class StepFailedError(SupervisorError):
    """A workflow step ran out of retries; the task branch keeps its last good state."""


class SpecConflictError(StepFailedError):
    """A worker reported that the task contradicts the base's tests (the specification): the
    engine stops for a person instead of spending retries (workflow/decide.py)."""

    def __init__(self, message: str, hint: str, *, step: str, reason: str, tests: list[str]):
        super().__init__(message, hint)
        self.step = step
        self.reason = reason
        self.tests = tests

    def record(self) -> dict[str, object]:
        """As the workflow's state keeps it (`spec_conflict`), for `approve`, `status`, resume."""
        return {"step": self.step, "reason": self.reason, "tests": self.tests}


class MachineFault(SupervisorError):
    """A fault of the machine, not of the worker nor the task (a full disk, a state database
    another program holds locked): the task keeps what it recorded and continues once the
    machine is fixed. `fix` says what to fix; `for_workflow` makes the hint say how to go on."""

    def __init__(self, message: str, *, fix: str, wf_id: int | None = None) -> None:
        super().__init__(message)
        self.fix = fix
        self.for_workflow(wf_id)

    def for_workflow(self, wf_id: int | None) -> None:
        """The hint for the task the command ran (None: no task was created)."""
        if wf_id is None:
            self.hint = f"{self.fix}, then run the command again."
        else:
            self.hint = (
                f"{self.fix}, then run `supervisor resume {wf_id}`: it continues from the "
                "last step it recorded."
            )
        self.wf_id = wf_id


class DiskFullError(MachineFault):
    """No space left on a file system the supervisor writes (the state database, worktrees,
    record folders); `path`: what could not be written, `database`: whether the state
    database itself could not record the change."""

    def __init__(
        self, message: str, *, fix: str, path: str, database: bool, wf_id: int | None = None
    ) -> None:
        super().__init__(message, fix=fix, wf_id=wf_id)
        self.path = path
        self.database = database


class DatabaseLockedError(MachineFault, StateError):
    """Another program held the state database's write lock past the busy timeout; nothing of
    the change was written (its transaction never began)."""


class DockerUnavailableError(MachineFault):
    """The Docker engine stopped answering under a running step (stopped, restarted, its socket
    gone) and did not come back within the wait (supervisor/sandbox/engine_loss.py). Not the
    worker's failure: the step's runs stay as a crash leaves them, for `resume` to adopt a
    worker that finished or run afresh one that died with the engine."""

    exit_code = 3  # as for an engine missing at the start (SandboxError)


class Terminated(KeyboardInterrupt):
    """The process was asked to stop (SIGTERM: systemd, `docker stop`, a CI runner's cancel).
    It unwinds like Ctrl-C, but a worker container still running is left running for `resume`
    to adopt (supervisor/sandbox/adopt.py) rather than ended with its work."""


class ApprovalRequired(SupervisorError):
    """The workflow stopped at a human approval gate; not a failure."""

    exit_code = 10
