"""The supervisor as a Harbor agent: Harbor's *external* agent shape, gates and sandbox kept.

Imported by Harbor (Python >= 3.12, its own virtual environment), never by the supervisor: it
imports Harbor and the standard library only. It runs on the host beside Harbor and:

1. finds the task environment's working directory (`pwd` through `environment.exec`) and brings
   its files into a local git repository (`environment.download_dir`);
2. runs the task there with the supervisor's own Python (supervisor/evals/harbor_bridge.py):
   `start-task --yes` with the chosen CLI and template, the worker in the supervisor's own Docker
   sandbox, the supervisor's gates judging the candidate;
3. writes the gated result (the task branch's changes, nothing else) back into the environment
   for Harbor's verifier; a task that stopped for a person or failed writes nothing back;
4. reports tokens and cost in the `AgentContext`, as Harbor's own CLI agents report theirs, and
   the outcome (resolved, stopped honestly, caught, ...) in its metadata.

    PYTHONPATH=/path/to/supervisor SUPERVISOR_PYTHON=/path/to/supervisor/.venv/bin/python \\
    harbor run -p TASKS -a supervisor.evals.harbor_agent:SupervisorAgent \\
        --ak cli=claude --ak template=_base

Agent kwargs (`--ak key=value`): `cli` (claude, codex, gemini), `template`, `test` (the test
gate's command; default: the supervisor finds the tests), `python` (the supervisor's Python;
default `$SUPERVISOR_PYTHON`, else `python3`), `api` (a scripted model API's URL: the offline
specs only). Harbor's `-m provider/model` becomes every role's model on that CLI.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

BRIDGE = "supervisor.evals.harbor_bridge"


class SupervisorAgent(BaseAgent):
    """Harbor's external agent over `supervisor start-task --yes`."""

    def __init__(
        self,
        logs_dir: Path,
        model_name: str | None = None,
        *args: Any,
        cli: str = "claude",
        template: str = "_base",
        test: str | None = None,
        python: str | None = None,
        api: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(logs_dir, model_name, *args, **kwargs)
        self.cli, self.template, self.test, self.api = cli, template, test, api
        self.python = python or os.environ.get("SUPERVISOR_PYTHON") or "python3"

    @staticmethod
    def name() -> str:
        return "supervisor"

    def version(self) -> str | None:
        return "1"

    async def setup(self, environment: BaseEnvironment) -> None:
        """Nothing goes into the task environment: the supervisor runs on the host."""

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        found = await environment.exec("pwd")
        workdir = (found.stdout or "").strip() or "/app"
        local = Path(tempfile.mkdtemp(prefix="supervisor-harbor-"))
        try:
            repo = local / "repo"
            await environment.download_dir(workdir, repo)
            _commit(repo)
            instruction_file = local / "instruction.md"
            instruction_file.write_text(instruction)
            result = await self._bridge(repo, instruction_file)
            for path in result.get("write", []):
                await environment.upload_file(repo / path, f"{workdir}/{path}")
            if result.get("delete"):
                names = " ".join(shlex.quote(p) for p in result["delete"])
                await environment.exec(f"rm -f -- {names}", cwd=workdir)
        finally:
            shutil.rmtree(local, ignore_errors=True)
        context.n_input_tokens = int(result.get("input_tokens") or 0)
        context.n_output_tokens = int(result.get("output_tokens") or 0)
        context.cost_usd = float(result.get("cost_usd") or 0.0)
        context.metadata = {
            k: result.get(k) for k in ("outcome", "reason", "on_branch", "workflow_id", "seconds")
        }

    async def _bridge(self, repo: Path, instruction_file: Path) -> dict[str, Any]:
        argv = [
            self.python, "-m", BRIDGE, "--repo", str(repo),
            "--instruction-file", str(instruction_file),
            "--cli", self.cli, "--template", self.template,
        ]  # fmt: skip
        if self.test:
            argv += ["--test", self.test]
        if self.model_name:  # Harbor's `-m provider/model`: every role's model on the CLI
            argv += ["--model", self.model_name.split("/", 1)[-1]]
        if self.api:
            argv += ["--api", self.api]
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await proc.communicate()
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        (self.logs_dir / "supervisor.log").write_bytes(err)
        if proc.returncode != 0:
            raise RuntimeError(
                f"The supervisor's run failed (exit {proc.returncode}): "
                f"{err.decode(errors='replace')[-2000:]} Check `python` (the supervisor's "
                "Python: --ak python=... or $SUPERVISOR_PYTHON) and its setup."
            )
        data: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
        (self.logs_dir / "supervisor-result.json").write_text(json.dumps(data, indent=2))
        return data


def _commit(repo: Path) -> None:
    """The environment's files as one commit on `main`: the base the supervisor's gates pin."""
    shutil.rmtree(repo / ".git", ignore_errors=True)  # its own history is not the task's base
    git = ["git", "-C", str(repo), "-c", "user.name=harbor", "-c", "user.email=harbor@localhost"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "The task's base"], check=True)
