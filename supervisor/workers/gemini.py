"""Google Gemini CLI as a worker: `gemini -o stream-json --yolo -m <model>`.

On error Gemini prints its JSON to stderr, leaves stdout without a result, and exits with the
error code modulo 256 (HTTP 500 → 244). Headless mode needs an auth method chosen in its settings
file, which goes into the run's private home with the CLI's own retries turned down.
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

NO_MCP_SERVER = "supervisor-allows-no-mcp-server"
# The user settings of the run's private home. A trusted workspace's `.gemini/settings.json`
# outranks them and gemini refuses --yolo in an untrusted one, so the sandbox masks the
# workspace's `.gemini/` and `.agents/` (sandbox/run_files.py); with those gone, these decide: no
# context file is found under any name (GEMINI.md at any depth), no hooks, no skills, no MCP
# server, no `.env` read from the workspace. Seen with gemini 0.61.0 against planted files.
PROJECT_CONFIG_OFF: dict[str, Any] = {
    "context": {
        "fileName": ["none-by-supervisor.context-off"],
        "memoryBoundaryMarkers": [],
    },
    "hooksConfig": {"enabled": False},
    "skills": {"enabled": False},
    "mcp": {"allowed": [NO_MCP_SERVER]},
    "advanced": {"ignoreLocalEnv": True},
}


class GeminiAdapter(WorkerAdapter):
    name = "gemini"
    binary = "gemini"

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
        settings = {
            "security": {
                "auth": {"selectedType": "gemini-api-key" if api_key_env else "oauth-personal"}
            },
            "privacy": {"usageStatisticsEnabled": False},
            "general": {"maxAttempts": 1, "disableAutoUpdate": True},
            **PROJECT_CONFIG_OFF,
        }
        argv = [
            self.binary,
            "-o",
            "stream-json",
            "--yolo",
            "-m",
            model,
            "--skip-trust",
            *extra_flags,
            # Last, so a configured flag cannot undo it: no MCP server starts (none has this name).
            "--allowed-mcp-server-names",
            NO_MCP_SERVER,
        ]
        env = {
            "GOOGLE_GEMINI_BASE_URL": base_url,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            # Otherwise gemini starts a second node process of itself, only to raise its heap
            # limit to half the host's memory: ~1 CPU-s more per run (2.6 -> 1.5 CPU-s for
            # `gemini --help` on the 2-core host), for a heap a short step never needs and the
            # container's memory limit caps anyway.
            "GEMINI_CLI_NO_RELAUNCH": "true",
        }
        return Invocation(
            argv=argv,
            env=env,
            home_files={".gemini/settings.json": json.dumps(settings).encode()},
        )

    def parse_output(self, stdout: str, stderr: str, exit_code: int) -> WorkerResult:
        events = _events(strip_ansi(stdout))
        text = "".join(
            str(e.get("content") or "")
            for e in events
            if e.get("type") == "message" and e.get("role") == "assistant"
        )
        result_event = next((e for e in reversed(events) if e.get("type") == "result"), None)
        stats = (result_event or {}).get("stats") or {}
        ok = exit_code == 0 and result_event is not None and result_event.get("status") == "success"
        result = WorkerResult(
            ok=ok,
            text=text,
            input_tokens=int(stats.get("input_tokens") or 0),
            output_tokens=int(stats.get("output_tokens") or 0),
            session_id=next((e.get("session_id") for e in events if e.get("type") == "init"), None),
            num_turns=int(stats.get("tool_calls") or 0) + 1 if result_event else None,
        )
        if not ok:
            error, status = _stderr_error(stderr)
            if result_event is not None and result_event.get("error"):
                error = str(result_event["error"])
            detail = error or strip_ansi(stderr).strip()[-1500:] or f"exit code {exit_code}"
            result.error = f"gemini failed (exit code {exit_code}): {detail}"
            result.api_status = status
            result.error_kind = classify_message(detail, status)
            result.retry_after = retry_after_seconds(detail)
        return result

    def progress(self, line: str) -> str | None:
        try:
            event = json.loads(line)
        except ValueError:
            return None
        if not isinstance(event, dict):
            return None
        if event.get("type") == "tool_use":
            params = event.get("parameters") or {}
            target = params.get("file_path") or params.get("command") or ""
            return f"→ {event.get('tool_name')} {str(target)[:80]}".rstrip()
        # No line for the CLI's own "result": whether the step's answer holds is said after
        # it is validated (workflow/steps/worker.py), not before.
        return None


def _stderr_error(stderr: str) -> tuple[str, int | None]:
    """Gemini's error JSON on stderr: {"error": {"type", "message", "code"}}."""
    text = strip_ansi(stderr)
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        error = value.get("error") if isinstance(value, dict) else None
        if isinstance(error, dict):
            code = error.get("code")
            return str(error.get("message") or ""), code if isinstance(code, int) else None
        start = text.find("{", start + 1)
    return "", None


def _events(text: str) -> list[dict[str, Any]]:
    events = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            events.append(value)
    return events
