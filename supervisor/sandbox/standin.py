"""A stand-in for DockerSandbox, for fast engine specs only (like SWE-ReX's dummy runtime).

The engine, SQLite, git and the claude adapter's parsing stay real; only the container is
replaced. A worker run calls a scripted Python function with the worktree (it writes files on the
host, as the CLI would inside the container) and hands back the stdout the real `claude -p
--output-format stream-json` would print; a gate run executes the gate command with a subprocess
in the worktree. That last part breaks the rule that nothing from a worktree runs on the host,
which is why this module is a test double: nothing in the package imports it and no setting can
select it (tests/test_engine_fast.py checks both); the specs' gates are commands like `test -f x`.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from supervisor.core.errors import CommandTimeoutError
from supervisor.sandbox.docker import RunResult, RunSpec
from supervisor.sandbox.egress import Route

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


@dataclass
class WorkerCall:
    """What a scripted worker sees: where it works and what the engine asked of it."""

    worktree: Path
    prompt: str
    step: str
    argv: list[str]
    env: dict[str, str]
    record_dir: Path | None = None
    """Where the credential proxy would record the run's model exchanges (see `record`)."""

    @property
    def role(self) -> str:
        """The role named in the prompt's `ROLE: <name>` line ('' if none)."""
        for line in self.prompt.splitlines():
            if line.startswith("ROLE: "):
                return line.removeprefix("ROLE: ").strip()
        return ""

    def write(self, path: str, text: str) -> None:
        target = self.worktree / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def envelope(
    text: str,
    *,
    is_error: bool = False,
    api_error_status: int | None = None,
    input_tokens: int = 100,
    output_tokens: int = 20,
) -> str:
    """The stdout of `claude -p --output-format stream-json --verbose`: an init line, the
    assistant's message, and the result envelope the adapter reads."""
    session = "standin-session"
    lines: list[dict[str, Any]] = [
        {"type": "system", "subtype": "init", "session_id": session, "tools": []},
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
            "session_id": session,
        },
        {
            "type": "result",
            "subtype": "success",
            "is_error": is_error,
            "result": text,
            "num_turns": 1,
            "session_id": session,
            "total_cost_usd": 0.001,
            "api_error_status": api_error_status,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        },
    ]
    return "".join(json.dumps(line) + "\n" for line in lines)


def answer(data: dict[str, Any], prose: str = "Done.") -> str:
    """A successful run whose final message carries `data` as a fenced JSON block."""
    return envelope(f"{prose}\n```json\n{json.dumps(data, indent=2)}\n```")


def record(
    call: WorkerCall, text: str, *, status: int = 200, headers: dict[str, str] | None = None
) -> None:
    """Record in the run's record folder, as the credential proxy does, the model API answering
    `text` (or `status`, with its `headers`): the bytes the scripted Anthropic API streams, so
    the witness (supervisor/workers/witness.py) reads the answer the real API would have sent."""
    from supervisor.fakeapi import anthropic
    from supervisor.fakeapi.script import Turn

    assert call.record_dir is not None, "the worker step gave the run no record folder"
    index = call.record_dir / "exchanges.jsonl"
    seq = len(index.read_text().splitlines()) if index.exists() else 0
    request = {"model": "claude-sonnet-4-5", "stream": True, "messages": [{"role": "user"}]}
    if status == 200:
        body = b"".join(anthropic.answer(Turn(text=text), request)[1])
        kept = {"content-type": "text/event-stream", **(headers or {})}
    else:
        body = json.dumps(anthropic.error_body(status, text)).encode()
        kept = {"content-type": "application/json", **(headers or {})}
    (call.record_dir / f"{seq:04d}.body").write_bytes(body)
    entry = {
        "seq": seq, "method": "POST", "path": "/v1/messages", "query": "beta=true",
        "status": status, "complete": True, "started": time.time(), "ended": time.time(),
        "headers": kept, "body": f"{seq:04d}.body",
    }  # fmt: skip
    with index.open("a") as f:
        f.write(json.dumps(entry) + "\n")


@dataclass
class StandinSandbox:
    """Runs workers as scripted callables and gates as host subprocesses; records every run."""

    worker: Callable[[WorkerCall], str]
    image: str = "standin"
    client: Any = None
    """No Docker client: project images (a .supervisor/sandbox/Dockerfile) are not supported."""
    runs: list[RunSpec] = field(default_factory=list)
    worker_calls: list[WorkerCall] = field(default_factory=list)
    closed: bool = False
    mounts_overlay: bool = False
    """Scripted workers write into a real folder: steps get fully written worktrees."""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def check_image(self) -> None:
        return None

    def base_image_id(self) -> str:
        return "sha256:standin"

    def route(self, base_url: str, injection: object = None, *_: object, **__: object) -> Route:
        del injection  # no container, no proxy: the scripted worker needs no key
        return Route(url=base_url, alias="standin-api", gateway="127.0.0.1")

    def close_route(self, route: Route) -> None:
        return None

    def remove_stale(self, labels: dict[str, str]) -> list[str]:
        return []

    def close(self) -> None:
        self.closed = True

    def run(self, spec: RunSpec) -> RunResult:
        self.runs.append(spec)
        container = f"standin-{next(self._ids)}"
        if spec.on_start is not None:
            spec.on_start(container)
        started = time.monotonic()
        if spec.argv[:2] == ["sh", "-c"]:
            return self._gate(spec, container, started)
        call = WorkerCall(
            worktree=spec.worktree,
            prompt=spec.stdin_text,
            step=spec.labels.get("supervisor.step", ""),
            argv=list(spec.argv),
            env=dict(spec.env),
            record_dir=spec.record_dir,
        )
        self.worker_calls.append(call)
        stdout = self.worker(call)
        if spec.on_output is not None:
            spec.on_output(stdout)
        return RunResult(0, stdout, "", time.monotonic() - started, container)

    def _gate(self, spec: RunSpec, container: str, started: float) -> RunResult:
        try:
            done = subprocess.run(
                spec.argv,
                cwd=spec.worktree,
                capture_output=True,
                text=True,
                timeout=spec.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise CommandTimeoutError(
                f"The gate `{spec.argv[-1]}` ran longer than {spec.timeout:.0f} s.",
                "Raise limits.gate_timeout_seconds or make the gate faster.",
            ) from e
        if spec.on_output is not None and done.stdout:
            spec.on_output(done.stdout)
        return RunResult(
            done.returncode, done.stdout, done.stderr, time.monotonic() - started, container
        )
