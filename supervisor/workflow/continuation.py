"""Bounded continuations: a planner sent back continues its own CLI session instead of a cold one.

Workers are stateless by default. A role listed under `continuity.continuation_roles` (the
planner and the investigator by default; never an implementer, whose work must be atomic) may,
when its answer is sent back (a plan that fails validation or comes back NEEDS_REFINEMENT),
continue the session it started, up to `max_continuation_turns` times; the engine decides each
turn (supervisor/workflow/continuity.py) and records it. This module acts:

- the resume command of each CLI, verified against the real binaries (docs/cli-formats notes):
  claude `-p --resume <session_id>`, codex `exec resume [options] <session_id> -` (that
  sub-command has no `-C`: the container's working directory is the workspace already), gemini
  `--resume <session_id>` (it accepts a session id as well as `latest` or an index);
- the private home the CLI keeps its session in (~/.claude/projects, ~/.codex/sessions,
  ~/.gemini/tmp): a host folder bound as the container's $HOME for the whole chain of turns and
  removed after. The host never reads it (it is the worker's, written by an adversary): it only
  creates it empty and removes it without following links. Login files and CLI settings are
  still copied in by the container on every turn, never written into it by the host.
"""

from __future__ import annotations

import os
import re
import shutil
from typing import TYPE_CHECKING, Any

from supervisor.core.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.context.roles import Role
    from supervisor.core.config import Settings

RESUMABLE = ("claude", "codex", "gemini")
STATE_DIR = ".supervisor"


def enabled(settings: Settings, role: Role) -> bool:
    """Whether this role's runs may be continued; an implementer listed is a config error."""
    policy = settings.continuity
    if not policy.allow_continuation or policy.max_continuation_turns == 0:
        return False
    if role.name not in policy.continuation_roles:
        return False
    if role.output == "implementation":
        raise ConfigError(
            f"continuity.continuation_roles lists '{role.name}', an implementing role: an "
            "implementation must be one atomic fresh run, never a continued session.",
            f"Remove '{role.name}' from continuity.continuation_roles (config/limits.yaml or "
            ".supervisor/config.yaml); continuations are for planners and investigators.",
        )
    return True


def resume_argv(cli: str, argv: list[str], session_id: str) -> list[str]:
    """The CLI's fresh command turned into the one that resumes `session_id`."""
    if cli == "claude":
        return [argv[0], "--resume", session_id, *argv[1:]]
    if cli == "gemini":
        return [argv[0], "--resume", session_id, *argv[1:]]
    if cli == "codex":
        # `codex exec [opts] -` -> `codex exec resume [opts] <id> -`; `-C <dir>` is not an
        # option of `exec resume`, and the container already starts in the workspace.
        rest = list(argv[2:])
        if "-C" in rest:
            at = rest.index("-C")
            del rest[at : at + 2]
        if rest and rest[-1] == "-":
            rest.pop()
        return [argv[0], "exec", "resume", *rest, session_id, "-"]
    raise ConfigError(
        f"The {cli} CLI has no known way to resume a session.",
        f"Remove the role from continuity.continuation_roles, or use one of {RESUMABLE}.",
    )


def home_dir(state_dir: Path, wf_id: int, step: str) -> Path:
    """Where a step's kept home lives on the host, under the project's state folder."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", step)
    return state_dir / "homes" / f"wf{wf_id}-{safe}"


def prepare_home(path: Path, *, fresh: bool) -> Path:
    """The kept home for a run: emptied first for a fresh session, kept for a resumed one; a
    private folder the container's user owns."""
    if fresh:
        discard(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.is_symlink():  # never ours: refuse to bind whatever it points to
        discard(path)
    path.mkdir(mode=0o700, exist_ok=True)
    if os.getuid() == 0:
        from supervisor.sandbox.run_files import container_user

        uid, gid = (int(n) for n in container_user().split(":"))
        os.chown(path, uid, gid, follow_symlinks=False)
    return path


def discard(path: Path) -> None:
    """Remove a kept home; links inside are removed, never followed."""
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


def discard_all(state_dir: Path, wf_id: int) -> None:
    """Every kept home of a workflow (it failed, completed or was abandoned)."""
    root = state_dir / "homes"
    if root.is_dir():
        for entry in root.glob(f"wf{wf_id}-*"):
            discard(entry)


def session_of(context: dict[str, Any], step: str, cli: str) -> str | None:
    """The session the engine decided this step continues, or None for a fresh run."""
    entry = (context.get("sessions") or {}).get(step) or {}
    if entry.get("cli") != cli:
        return None
    return entry.get("session_id") or None


class Turn:
    """What one run of a continuing role sends: the whole prompt (a fresh session) or only the
    feedback on its last answer (a resumed one), and the command to match."""

    def __init__(self, prompt: str, session_id: str | None) -> None:
        self.prompt = prompt
        self.session_id = session_id

    def argv(self, cli: str, argv: list[str]) -> list[str]:
        return argv if self.session_id is None else resume_argv(cli, argv, self.session_id)


def begin(run: Any, c: Any, wf: Any, prompt: str) -> Turn:
    """Set up a worker run (`run`: the worker step's WorkerRun) of a role that may continue: its
    kept home, and, when the engine decided to continue, the resumed session's short prompt."""
    if not enabled(c.settings, run.role):
        return Turn(prompt, None)
    session = session_of(wf.context, run.name, run.cli)
    run.home = prepare_home(home_dir(c.repo / STATE_DIR, wf.id, run.name), fresh=session is None)
    if session is None:
        return Turn(prompt, None)
    from supervisor.context import prompts
    from supervisor.core.redaction import redact

    feedback = (wf.context.get("feedback") or {}).get(run.name) or ["(no feedback recorded)"]
    text = prompts.render(
        "continue.j2", c.repo, run.role.schema, role=run.role, feedback=feedback[-1]
    )
    return Turn(redact(text)[0], session)


def after_run(outcome: Any, cli: str, session_id: str | None, home: Path) -> None:
    """A run sent back keeps its home and reports its session for the engine to decide on;
    any other end (passed, escalated) discards the home."""
    if outcome.result == "failed" and outcome.escalate is None and outcome.transient is None:
        outcome.session = {"cli": cli, "session_id": session_id} if session_id else None
        return
    if outcome.transient is not None:
        return  # the same run again: the session stays as the engine left it
    discard(home)
