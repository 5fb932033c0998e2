"""What the real `claude` does at start in a worker run (issue 30, items 1 and 6): the real binary
in the real sandbox against the scripted Anthropic API, with the adapter's own command line.

Most of a start is the binary's own runtime (about 1 CPU-s on the 2-core host, no switch touches
it); what the switches in workers/claude.py (START_UP_OFF) turn off shows at the API and in the
sandbox: no auto-memory instructions and no git status snapshot in the first request, and no git
process run for that snapshot. The sandbox's own `git` is watched through a logging `git` first on
the container's PATH, which then runs the real one: nothing is mocked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from e2e_support import IMAGE, require_sandbox

from supervisor.fakeapi import ScriptedModelServer, load_script
from supervisor.sandbox.docker import DockerSandbox, RunSpec
from supervisor.workers.claude import ClaudeAdapter

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker
NETWORK = "supervisor-egress-test"
LOG = "/tmp/git-calls.log"
SHIM = f'#!/bin/sh\necho "git $*" >> {LOG}\nexec /usr/bin/git "$@"\n'
PATH = "/workspace/.shim:/opt/supervisor/node_modules/.bin:/usr/local/bin:/usr/bin:/bin"


def test_a_worker_run_sends_no_memory_or_git_snapshot_and_runs_no_git_for_it(
    tmp_path: Path,
) -> None:
    require_sandbox()
    workspace = tmp_path / "ws"
    (workspace / ".shim").mkdir(parents=True)
    (workspace / ".shim" / "git").write_text(SHIM)
    (workspace / ".shim" / "git").chmod(0o755)
    (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    # As a step's workspace: a `.git` file naming a git directory the sandbox does not have.
    (workspace / ".git").write_text("gitdir: /nonexistent/supervisor-workspace\n")
    script = load_script({"conversations": [{"turns": [{"text": "Done."}]}]})
    sandbox = DockerSandbox(IMAGE, NETWORK)
    try:
        with ScriptedModelServer(script) as server:
            route = sandbox.route(server.url)
            adapter = ClaudeAdapter()
            invocation = adapter.build(
                model="claude-sonnet-4-5", base_url=route.url, workdir="/workspace", extra_flags=[]
            )
            run = sandbox.run(
                RunSpec(
                    # The adapter's argv as it is, then the log of the git calls on stderr.
                    argv=["sh", "-c", f'"$@"; cat {LOG} >&2', "sh", *invocation.argv],
                    worktree=workspace,
                    env={**invocation.env, "ANTHROPIC_API_KEY": "test-key", "PATH": PATH},
                    stdin_text="ROLE: test\nSay done.",
                    network=NETWORK,
                    route=route,
                    timeout=120,
                )
            )
            requests = [r for r in server.requests if r.body.get("tools")]
    finally:
        sandbox.close()
    result = adapter.parse_output(run.stdout, run.stderr, run.exit_code)
    assert result.ok, f"{result.error} / {run.stderr[-800:]}"
    system = "\n".join(block.get("text", "") for block in requests[0].body["system"])
    assert "gitStatus" not in system
    assert "auto memory" not in system.lower()
    git_calls = [line for line in run.stderr.splitlines() if line.startswith("git ")]
    assert git_calls, "the logging git saw no call at all: the watch is not live"
    assert not [c for c in git_calls if " status" in c or " log " in c], git_calls
