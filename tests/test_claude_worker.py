"""Contract tests: the real `claude` binary in the real sandbox, against the scripted Anthropic
API.

They pin what the adapter relies on in the CLI's real output, so that a CLI update that changes it
fails here first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import IMAGE, require_sandbox

from supervisor.fakeapi import ScriptedModelServer, load_script
from supervisor.sandbox.docker import DockerSandbox, RunSpec
from supervisor.workers.claude import ClaudeAdapter

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from supervisor.workers.base import WorkerResult

pytestmark = pytest.mark.docker
NETWORK = "supervisor-egress-test"


@pytest.fixture
def sandbox() -> Iterator[DockerSandbox]:
    require_sandbox()
    box = DockerSandbox(IMAGE, NETWORK)
    yield box
    box.close()


def run_claude(
    sandbox: DockerSandbox, worktree: Path, turns: list[dict[str, Any]], repeat: bool = False
) -> tuple[WorkerResult, ScriptedModelServer]:
    # `repeat`: the CLI's own retry of a failed request gets the same answer.
    script = load_script({"conversations": [{"turns": turns, "repeat": repeat}]})
    with ScriptedModelServer(script) as server:
        route = sandbox.route(server.url)
        adapter = ClaudeAdapter()
        invocation = adapter.build(
            model="claude-sonnet-4-5", base_url=route.url, workdir="/workspace", extra_flags=[]
        )
        run = sandbox.run(
            RunSpec(
                argv=invocation.argv,
                worktree=worktree,
                env={**invocation.env, "ANTHROPIC_API_KEY": "test-key"},
                stdin_text="ROLE: test\nWrite the file.",
                network=NETWORK,
                route=route,
                timeout=120,
            )
        )
        return adapter.parse_output(run.stdout, run.stderr, run.exit_code), server


def test_a_tool_call_writes_the_file_and_the_envelope_carries_the_answer(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    result, server = run_claude(
        sandbox,
        tmp_path,
        [
            {"tool_use": {"name": "Write", "input": {"file_path": "hello.py", "content": "x=1\n"}}},
            {"text": 'Done.\n```json\n{"ok": true}\n```'},
        ],
    )
    assert result.ok, result.error
    assert (tmp_path / "hello.py").read_text() == "x=1\n"
    assert '"ok": true' in result.text
    assert result.input_tokens > 0 and result.output_tokens > 0
    assert result.session_id
    assert result.num_turns == 2
    second = server.requests[-1].body["messages"]
    assert any(
        block.get("type") == "tool_result"
        for message in second
        if isinstance(message.get("content"), list)
        for block in message["content"]
    )


def test_an_api_error_is_an_error_although_the_subtype_says_success(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    result, _ = run_claude(
        sandbox, tmp_path, [{"error": {"status": 500, "message": "boom"}}], repeat=True
    )
    assert not result.ok
    assert result.api_status == 500
    assert result.error_kind == "api"
    assert "500" in (result.error or "")


def test_a_rejected_key_is_classified_as_an_auth_error(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    result, _ = run_claude(
        sandbox, tmp_path, [{"error": {"status": 401, "message": "bad key"}}], repeat=True
    )
    assert not result.ok
    assert result.error_kind == "auth"


def test_a_refused_write_is_not_trusted_from_the_cli_report(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    # Write to an existing file that was never read: the CLI refuses, yet reports success.
    (tmp_path / "calc.py").write_text("original\n")
    result, _ = run_claude(
        sandbox,
        tmp_path,
        [
            {"tool_use": {"name": "Write", "input": {"file_path": "calc.py", "content": "new\n"}}},
            {"text": "I wrote calc.py."},
        ],
    )
    assert result.ok  # the CLI itself says all is well ...
    assert (tmp_path / "calc.py").read_text() == "original\n"  # ... the worktree says otherwise
