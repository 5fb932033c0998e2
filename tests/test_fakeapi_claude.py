"""The scripted model API against the real `claude` binary on the host, and its matching rules.

The binary tests pin what the supervisor and the test-suite rely on: that the CLI really runs a
scripted tool call, that its JSON envelope reports API errors, and that `when` picks the right
conversation. A Claude Code update that changes how it talks to the API fails here first.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import missing
from pydantic import ValidationError

from supervisor.core.config import NODE_BIN
from supervisor.core.process import find_program
from supervisor.fakeapi import ScriptedModelServer, ScriptPlayer, load_script
from supervisor.fakeapi.script import EXHAUSTED_TEXT, UNMATCHED_TEXT

if TYPE_CHECKING:
    from pathlib import Path

MODEL = "claude-sonnet-4-5"
FINAL = 'Done.\n```json\n{"status": "COMPLETE", "files": ["calc.py"]}\n```'
CALC = "def add(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def claude() -> str:
    try:
        return find_program("claude", [NODE_BIN])
    except Exception as e:  # missing binary, whatever the reason: skip locally, fail under CI
        missing(f"claude binary not found: {e}")
        raise


def run_claude(
    claude: str, server: ScriptedModelServer, tmp_path: Path, prompt: str
) -> tuple[dict[str, Any], int, float, Path]:
    """Run the CLI as the supervisor does, isolated in tmp dirs; returns the parsed envelope,
    exit code, wall seconds and the working directory."""
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": "test-key",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "IS_SANDBOX": "1",  # we run as root here; the sandbox runs as a non-root user instead
    }
    argv = [claude, "-p", prompt, "--output-format", "json", "--model", MODEL]
    argv.append("--dangerously-skip-permissions")
    started = time.monotonic()
    done = subprocess.run(
        argv,
        env=env,
        cwd=work,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    elapsed = time.monotonic() - started
    try:
        envelope = json.loads(done.stdout)
    except ValueError:
        pytest.fail(f"no JSON envelope (exit {done.returncode}): {done.stdout!r} {done.stderr!r}")
    return envelope, done.returncode, elapsed, work


def _has_tool_result(body: dict[str, Any]) -> bool:
    return any(
        block.get("type") == "tool_result"
        for message in body.get("messages", [])
        if isinstance(message.get("content"), list)
        for block in message["content"]
    )


# --- the real binary -------------------------------------------------------------------------


@pytest.mark.cli
def test_a_scripted_write_creates_the_file_and_the_answer_reaches_the_envelope(
    claude: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = load_script(
        {
            "conversations": [
                {
                    "when": "ROLE: implementer",
                    "turns": [
                        {
                            "tool_use": {
                                "name": "Write",
                                "input": {"file_path": "calc.py", "content": CALC},
                            }
                        },
                        {"text": FINAL},
                    ],
                }
            ]
        }
    )
    with ScriptedModelServer(script) as server:
        envelope, code, elapsed, work = run_claude(
            claude, server, tmp_path, "ROLE: implementer\nWrite calc.py."
        )
        requests = server.requests
        probes = server.probes
    with capsys.disabled():
        print(f"\n[fakeapi] two-turn claude run: {elapsed:.2f} s wall")

    assert code == 0, envelope
    assert envelope["is_error"] is False
    assert envelope["num_turns"] == 2
    assert '```json\n{"status": "COMPLETE"' in envelope["result"]
    assert envelope["usage"]["input_tokens"] > 1000  # the estimate is real-sized, not a stub
    assert (work / "calc.py").read_text() == CALC

    turns = [r for r in requests if r.kind == "scripted"]
    assert [(r.conversation, r.turn) for r in turns] == [(0, 0), (0, 1)]
    assert all(r.path == "/v1/messages?beta=true" and r.body["stream"] for r in turns)
    assert all(r.headers["anthropic-version"] == "2023-06-01" for r in turns)
    assert all(r.headers["x-api-key"] == "[redacted]" for r in turns)  # present, never kept
    assert not _has_tool_result(turns[0].body)
    assert _has_tool_result(turns[1].body)
    assert all(p.method in ("HEAD", "GET") for p in probes)
    assert elapsed < 60


@pytest.mark.cli
def test_an_http_500_is_an_error_envelope_and_exit_1(claude: str, tmp_path: Path) -> None:
    script = load_script({"conversations": [{"turns": [{"error": {"status": 500}}]}]})
    with ScriptedModelServer(script) as server:
        envelope, code, _, _ = run_claude(claude, server, tmp_path, "ROLE: implementer\nGo.")
    assert code == 1
    assert envelope["is_error"] is True
    assert envelope["subtype"] == "success"  # sic: API errors keep it; only is_error tells
    assert envelope["api_error_status"] == 500
    assert "500" in envelope["result"]


@pytest.mark.cli
@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("bad credentials", "Failed to authenticate. API Error: 401"),
        # The CLI reads the message: the real API's wording gets a wording of its own.
        ("invalid x-api-key", "Invalid API key"),
    ],
)
def test_an_http_401_reads_as_an_authentication_failure(
    claude: str, tmp_path: Path, message: str, shown: str
) -> None:
    error = {"status": 401, "message": message}
    script = load_script({"conversations": [{"turns": [{"error": error}]}]})
    with ScriptedModelServer(script) as server:
        envelope, code, _, _ = run_claude(claude, server, tmp_path, "ROLE: implementer\nGo.")
    assert code == 1
    assert envelope["is_error"] is True
    assert envelope["api_error_status"] == 401
    assert shown in envelope["result"]


@pytest.mark.cli
@pytest.mark.parametrize("order", [("implementer", "reviewer"), ("reviewer", "implementer")])
def test_when_selects_the_conversation_whatever_the_order(
    claude: str, tmp_path: Path, order: tuple[str, str]
) -> None:
    script = load_script(
        {
            "conversations": [
                {"when": "ROLE: reviewer", "turns": [{"text": "review says APPROVED"}]},
                {"when": "ROLE: implementer", "turns": [{"text": "implementer says DONE"}]},
            ]
        }
    )
    expected = {"implementer": "implementer says DONE", "reviewer": "review says APPROVED"}
    with ScriptedModelServer(script) as server:
        for role in order:
            envelope, code, _, _ = run_claude(
                claude, server, tmp_path / role, f"ROLE: {role}\nDo your part."
            )
            assert code == 0, envelope
            assert envelope["result"] == expected[role]
        assert server.unmatched == []
        assert server.player.unused() == []


# --- the server over HTTP, without the binary ------------------------------------------------


def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def _sse(raw: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :])
        for line in raw.decode().splitlines()
        if line.startswith("data: ")
    ]


def _opening(text: str, *, stream: bool = True) -> dict[str, Any]:
    return {
        "model": MODEL,
        "stream": stream,
        "system": [{"type": "text", "text": "Env\nWorking directory: /tmp/w\nPlatform: linux"}],
        "tools": [{"name": "Write", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
    }


def test_the_stream_carries_the_tool_call_with_an_absolute_path() -> None:
    write = {"tool_use": {"name": "Write", "input": {"file_path": "a/b.py", "content": "x" * 100}}}
    with ScriptedModelServer(load_script({"conversations": [{"turns": [write]}]})) as server:
        status, headers, raw = _post(server.url + "/v1/messages?beta=true", _opening("go"))
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    events = _sse(raw)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["message_start", "ping"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert events[0]["message"]["usage"]["input_tokens"] > 0
    arguments = json.loads(
        "".join(e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta")
    )
    assert arguments == {"file_path": "/tmp/w/a/b.py", "content": "x" * 100}
    assert events[-2]["delta"]["stop_reason"] == "tool_use"


def test_errors_side_calls_and_unknown_paths() -> None:
    script = load_script(
        {
            "conversations": [
                {"when": "limit", "turns": [{"error": {"status": 429, "retry_after": 5}}]},
                {"turns": [{"text": "plain"}]},
            ]
        }
    )
    with ScriptedModelServer(script) as server:
        status, headers, raw = _post(server.url + "/v1/messages", _opening("limit me"))
        assert (status, headers["retry-after"]) == (429, "5")
        assert json.loads(raw)["error"]["type"] == "rate_limit_error"

        status, _, raw = _post(server.url + "/v1/messages", _opening("hello", stream=False))
        assert (status, json.loads(raw)["content"]) == (200, [{"type": "text", "text": "plain"}])
        assert json.loads(raw)["stop_reason"] == "end_turn"

        # A title request: no tools, a JSON schema; answered aside, no conversation used.
        title = {
            **_opening("<session>limit</session>"),
            "tools": [],
            "output_config": {
                "format": {
                    "type": "json_schema",
                    # As the real API demands (the fake refuses it otherwise, as the API does).
                    "schema": {
                        "type": "object",
                        "properties": {"title": {"type": "string"}},
                        "required": ["title"],
                        "additionalProperties": False,
                    },
                }
            },
        }
        _, _, raw = _post(server.url + "/v1/messages", title)
        text = "".join(e["delta"].get("text", "") for e in _sse(raw) if "delta" in e)
        assert set(json.loads(text)) == {"title"}

        status, _, raw = _post(server.url + "/v1/messages/count_tokens", _opening("x"))
        assert status == 200 and json.loads(raw)["input_tokens"] > 0
        status, _, _ = _post(server.url + "/v2/elsewhere", {})
        assert status == 404
        kinds = [r.kind for r in server.requests]
        assert kinds == ["scripted", "scripted", "side", "side", "unknown"]
        assert [r.path for r in server.unmatched] == ["/v2/elsewhere"]


# --- matching, pure Python ---------------------------------------------------------------------


def test_matching_rules() -> None:
    player = ScriptPlayer(
        load_script(
            {
                "conversations": [
                    {"when": "ROLE: reviewer", "turns": [{"text": "r1"}]},
                    {"when": "ROLE: implementer", "turns": [{"text": "i1"}, {"text": "i2"}]},
                    {"when": "ROLE: implementer", "turns": [{"text": "i-second"}]},
                    {"when": "ROLE: planner", "repeat": True, "turns": [{"text": "plan"}]},
                ]
            }
        )
    )
    # A new conversation takes the first unused match, wherever `when` appears in the request.
    first = player.choose("run 1: ROLE: implementer", "system\nrun 1: ROLE: implementer", 0)
    assert (first.conversation, first.turn.text, first.outcome) == (1, "i1", "scripted")
    # Later requests come back to it by the opening; the turn is the count of assistant turns.
    assert player.choose("run 1: ROLE: implementer", "...", 1).turn.text == "i2"
    assert player.choose("run 1: ROLE: implementer", "...", 2).outcome == "exhausted"
    assert player.choose("run 1: ROLE: implementer", "...", 2).turn.text == EXHAUSTED_TEXT
    # The CLI re-sending the same opening (its own retry) stays in the same conversation...
    assert player.choose("run 1: ROLE: implementer", "x ROLE: implementer", 0).conversation == 1
    # ...while a new run with the same role takes the next one, and a third finds none left.
    assert player.choose("run 2", "run 2 ROLE: implementer", 0).turn.text == "i-second"
    third = player.choose("run 3", "run 3 ROLE: implementer", 0)
    assert (third.outcome, third.turn.text, third.conversation) == (
        "unmatched",
        UNMATCHED_TEXT,
        None,
    )
    # `when` may be found in the system prompt only.
    assert player.choose("review it", "ROLE: reviewer\nreview it", 0).turn.text == "r1"
    # `repeat` is never used up.
    assert player.choose("p1", "ROLE: planner p1", 0).turn.text == "plan"
    assert player.choose("p2", "ROLE: planner p2", 0).turn.text == "plan"
    # A follow-up of a conversation nobody started cannot be answered from the script.
    assert player.choose("never seen", "never seen", 1).outcome == "unmatched"
    assert player.unused() == []


def test_a_run_that_broke_off_mid_conversation_is_heard_again_by_its_retry() -> None:
    player = ScriptPlayer(
        load_script(
            {
                "conversations": [
                    {"when": "ROLE: implementer", "turns": [{"text": "write"}, {"text": "done"}]},
                    {"when": "ROLE: reviewer", "turns": [{"text": "approved"}]},
                ]
            }
        )
    )
    assert player.choose("attempt 1", "attempt 1 ROLE: implementer", 0).turn.text == "write"
    # Attempt 1's follow-up never arrived (its connection dropped); the supervisor's retry is a
    # new run, and with no unused conversation left it replays the broken-off one from the start.
    retry = player.choose("attempt 2", "attempt 2 ROLE: implementer", 0)
    assert (retry.conversation, retry.turn.text) == (0, "write")
    assert player.choose("attempt 2", "...", 1).turn.text == "done"
    # A conversation played to its last turn is finished: a third run finds nothing.
    assert player.choose("attempt 3", "attempt 3 ROLE: implementer", 0).outcome == "unmatched"
    # A conversation never started is still preferred to a replay.
    assert player.choose("review", "ROLE: reviewer review", 0).turn.text == "approved"


def test_a_missing_when_matches_anything_and_scripts_load_from_yaml(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text(
        "conversations:\n"
        "  - turns:\n"
        "      - delay: 0.5\n"
        "        tool_use: {name: Write, input: {file_path: calc.py, content: 'x = 1'}}\n"
        "      - error: {status: 429, message: rate limited, retry_after: 5}\n"
    )
    player = ScriptPlayer(load_script(path))
    choice = player.choose("anything", "anything", 0)
    assert choice.conversation == 0 and choice.turn.delay == 0.5
    assert choice.turn.tool_use is not None and choice.turn.tool_use.name == "Write"
    error = player.choose("anything", "anything", 1).turn.error
    assert error is not None and (error.status, error.retry_after) == (429, 5)


@pytest.mark.parametrize(
    "turn",
    [{}, {"text": "a", "error": {"status": 500}}, {"txt": "typo"}, {"error": {"status": 200}}],
)
def test_a_malformed_turn_is_refused(turn: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        load_script({"conversations": [{"turns": [turn]}]})
