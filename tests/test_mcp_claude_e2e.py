"""The real `claude` binary as the MCP client of `supervisor mcp`: its `--mcp-config` starts the
server (tests/mcp_standin.py: the real command, workers scripted on the stand-in sandbox), the
scripted model API asks it to call `start_task` and then `task_status`, and what the tools
answered reaches the model in claude's next request.

Real parts: claude (from npm, on the host: it only calls tools here, nothing of the sandbox),
its MCP client, the SDK's server, the scripted model API on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_support import missing
from mcp_standin import new_project

from supervisor.fakeapi import ScriptedModelServer, load_script
from supervisor.lifecycle.task_state import workflows

pytestmark = pytest.mark.cli
CLAUDE = Path(__file__).resolve().parent.parent / "node_modules" / ".bin" / "claude"
DRIVER = Path(__file__).resolve().parent / "mcp_standin.py"
MARK = "MCP-SPEC"
WAIT_S = 60.0


def tool_results(requests: list[Any]) -> list[str]:
    """The text of every tool_result block claude sent back to the model, in the conversation's
    last request (which carries the whole conversation)."""
    found = []
    for request in requests[-1:]:
        for message in request.body.get("messages") or []:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result":
                    inner = block.get("content")
                    if isinstance(inner, list):
                        inner = "".join(b.get("text", "") for b in inner)
                    found.append(str(inner))
    return found


def settled(repo: Path) -> None:
    """Wait (bounded) until the task's background run stopped, so that nothing of the spec
    outlives it."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if all(wf.status != "running" for wf in workflows(repo)):
            return
        time.sleep(0.2)


def test_claude_starts_a_task_through_the_server_and_reads_its_status(
    tmp_path: Path, api_keys: None
) -> None:
    if not CLAUDE.exists():
        missing(f"the claude binary is not installed at {CLAUDE} (npm ci)")
    repo = new_project(tmp_path / "repo")
    script = load_script(
        {
            "conversations": [
                {
                    "when": MARK,
                    "turns": [
                        {
                            "tool_use": {
                                "name": "mcp__supervisor__start_task",
                                "input": {"task": "Write the answer file", "depth": "planned"},
                            }
                        },
                        {"tool_use": {"name": "mcp__supervisor__task_status", "input": {"id": 1}}},
                        {"text": "Started task 1."},
                    ],
                }
            ]
        }
    )
    servers = {
        "mcpServers": {
            "supervisor": {
                "command": sys.executable,
                "args": [str(DRIVER), "mcp", "--repo", str(repo)],
                "alwaysLoad": True,  # connected before the first turn (claude's own option)
            }
        }
    }
    allowed = "mcp__supervisor__start_task,mcp__supervisor__task_status"
    with ScriptedModelServer(script) as api:
        env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": api.url,
            "ANTHROPIC_API_KEY": "test-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": "1",
            # In -p mode claude connects its MCP servers in the background by default, and a
            # first turn that calls a tool finds it "still connecting": wait for them first.
            "MCP_CONNECTION_NONBLOCKING": "false",
            "HOME": str(tmp_path / "home"),
        }
        done = subprocess.run(
            [str(CLAUDE), "-p", f"{MARK}: start the task", "--output-format", "json",
             "--model", "claude-sonnet-4-5", "--mcp-config", json.dumps(servers),
             "--strict-mcp-config", "--allowedTools", allowed, "--max-turns", "5"],
            env=env, cwd=repo, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        results = tool_results(api.requests)
    settled(repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["result"] == "Started task 1."
    started, status = (json.loads(r) for r in results[:2])
    assert started["id"] == 1 and started["started"] is True
    assert status["id"] == 1 and status["description"] == "Write the answer file"
