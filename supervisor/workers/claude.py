"""Claude Code as a worker: `claude -p --output-format stream-json --verbose`.

The stream's last line is the same result envelope that `--output-format json` prints; the lines
before it (one per message and tool call) let the terminal follow the worker live and let the
sandbox tell a hung worker from a busy one. An API error keeps `subtype: "success"` and sets
`is_error: true`, so success is read from `is_error` and the exit code together, never from
`subtype` alone.
"""

from __future__ import annotations

import json
from typing import Any

from supervisor.core.parsing import strip_ansi
from supervisor.workers.base import (
    Invocation,
    WorkerAdapter,
    WorkerResult,
    classify_message,
    retry_after_seconds,
)

# Seen with claude 2.1.197 against planted files (tests/test_cli_project_config_e2e.py).
PROJECT_CONFIG_OFF = ("--setting-sources", "user", "--strict-mcp-config")
# What the CLI does at every start for a long-lived user, which a one-step worker with a fresh
# home never uses (documented switches; seen with claude 2.1.197, tests/test_claude_startup_e2e.py):
START_UP_OFF = {
    # Auto memory: ~12 KB of instructions in every request's system prompt and a memory folder
    # made at start, for notes no later step reads (each run's home is new; the supervisor hands
    # a step what it needs in its prompt).
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
    # The git status snapshot and commit/PR instructions: three git processes between the prompt
    # and the first request, in a workspace whose `.git` points outside the sandbox (they fail);
    # the supervisor commits, and the worker can still run git itself.
    "CLAUDE_CODE_DISABLE_GIT_INSTRUCTIONS": "1",
}


class ClaudeAdapter(WorkerAdapter):
    name = "claude"
    binary = "claude"
    budget_flag = "--max-budget-usd"
    # Read as text, stdin is taken at start-up, before most of it (about 2 s of a 2.7 s start on
    # a loaded host); as one stream-json user message, the CLI starts up, then waits for it.
    late_prompt_flags = ("--input-format", "stream-json")

    def late_prompt(self, prompt: str) -> str:
        message = {"type": "user", "message": {"role": "user", "content": prompt}}
        return json.dumps(message) + "\n"

    def build(
        self,
        *,
        model: str,
        base_url: str,
        workdir: str,
        extra_flags: list[str],
        api_key_env: str | None = None,
        schema_path: str | None = None,
    ) -> Invocation:
        argv = [
            self.binary,
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            model,
            "--dangerously-skip-permissions",
            *extra_flags,
            # Last, so a configured flag cannot undo them: only the run's private home's settings
            # (no project hooks, env, permissions, skills, agents, CLAUDE.md at any depth) and
            # no MCP server but those given here (none; `.mcp.json` is ignored).
            *PROJECT_CONFIG_OFF,
        ]
        env = {
            "ANTHROPIC_BASE_URL": base_url,
            # Telemetry, update checks and other side traffic off: the sandbox allows only the API.
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            # A few quick retries carry a request over a dropped connection; the supervisor's
            # policy (rate limits, failover) stays in charge of the rest.
            "CLAUDE_CODE_MAX_RETRIES": "2",
            **START_UP_OFF,
        }
        return Invocation(argv=argv, env=env)

    def parse_output(self, stdout: str, stderr: str, exit_code: int) -> WorkerResult:
        envelope = _last_json_object(strip_ansi(stdout))
        if envelope is None:
            detail = strip_ansi(stderr or stdout).strip()[-1500:] or "(no output)"
            return WorkerResult(
                ok=False,
                text="",
                error=f"claude exited with code {exit_code} and printed no JSON result: {detail}",
                error_kind="cli",
            )
        usage = envelope.get("usage") or {}
        text = str(envelope.get("result") or "")
        result = WorkerResult(
            ok=not envelope.get("is_error") and exit_code == 0,
            text=text,
            api_status=envelope.get("api_error_status"),
            input_tokens=int(usage.get("input_tokens") or 0)
            + int(usage.get("cache_read_input_tokens") or 0)
            + int(usage.get("cache_creation_input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            cost_usd=float(envelope.get("total_cost_usd") or 0.0),
            session_id=envelope.get("session_id"),
            num_turns=envelope.get("num_turns"),
            permission_denials=list(envelope.get("permission_denials") or []),
        )
        if not result.ok:
            result.error = text or f"claude reported an error (exit code {exit_code})"
            result.error_kind = _error_kind(envelope, text)
            result.retry_after = retry_after_seconds(text)
        return result

    def progress(self, line: str) -> str | None:
        try:
            event = json.loads(line)
        except ValueError:
            return line.strip() or None
        if not isinstance(event, dict):
            return None
        kind = event.get("type")
        if kind == "assistant":
            parts = []
            for block in (event.get("message") or {}).get("content") or []:
                if block.get("type") == "tool_use":
                    arguments = block.get("input") or {}
                    target = arguments.get("file_path") or arguments.get("command") or ""
                    parts.append(f"→ {block.get('name')} {str(target)[:80]}".rstrip())
                elif block.get("type") == "text" and block.get("text", "").strip():
                    parts.append(block["text"].strip().splitlines()[0][:100])
            return "\n".join(parts) or None
        # No line for the CLI's own "result": whether the step's answer holds is said after
        # it is validated (workflow/steps/worker.py), not before.
        return None


def _error_kind(envelope: dict[str, Any], text: str) -> str:
    if envelope.get("subtype") == "error_max_turns":
        return "max_turns"
    kind = classify_message(text, envelope.get("api_error_status"))
    return "api" if kind == "cli" and "api error" in text.lower() else kind


def _last_json_object(text: str) -> dict[str, Any] | None:
    """The result object: the whole output, or its last line (warnings may precede it)."""
    for candidate in [text, *reversed(text.strip().splitlines())]:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict) and value.get("type") == "result":
            return value
    return None
