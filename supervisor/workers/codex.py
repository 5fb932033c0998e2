"""OpenAI Codex CLI as a worker: `codex exec --json`, a JSON-lines event stream.

The provider is configured on the command line (`-c` overrides, no config file), pointing at the
configured base URL with the Responses API and the CLI's own retries off. Codex can exit 0 while a
`file_change` item failed, so the supervisor reads the items, and still checks the worktree.
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

PROVIDER = "supervisor"
# No AGENTS.md / AGENTS.override.md (project docs are cut to 0 bytes), no hooks, no execpolicy
# rules files. Project `.codex/config.toml` (its MCP servers, notify command) is not loaded for
# an untrusted project, and the run's home trusts none; `.agents/skills` and `.codex/skills` have
# no switch and are masked by the sandbox (sandbox/run_files.py). Seen with codex-cli 0.169.0.
PROJECT_CONFIG_OFF = ("-c", "project_doc_max_bytes=0", "--disable", "hooks", "--ignore-rules")


class CodexAdapter(WorkerAdapter):
    name = "codex"
    binary = "codex"
    supports_json_schema = True

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
            self.binary, "exec", "--json", "--dangerously-bypass-approvals-and-sandbox",
            "--skip-git-repo-check", "-C", workdir,
            "-c", f"model={json.dumps(model)}",
            "-c", "analytics.enabled=false",
            "--disable", "plugins", "--disable", "apps", "--disable", "remote_plugin",
        ]  # fmt: skip
        if api_key_env is not None:
            # An API key (or a gateway): our own provider entry with the configured base URL.
            settings = {
                "name": "supervisor",
                "base_url": base_url,
                "env_key": api_key_env,
                "wire_api": "responses",
                "request_max_retries": 0,
                "stream_max_retries": 0,
            }
            argv += ["-c", f"model_provider={json.dumps(PROVIDER)}"]
            for key, value in settings.items():
                argv += ["-c", f"model_providers.{PROVIDER}.{key}={json.dumps(value)}"]
        if schema_path is not None:
            argv += ["--output-schema", schema_path]
        # After the configured flags, so none undoes them; "-": the prompt is read from stdin.
        argv += [*extra_flags, *PROJECT_CONFIG_OFF, "-"]
        return Invocation(argv=argv, env={})

    def parse_output(self, stdout: str, stderr: str, exit_code: int) -> WorkerResult:
        events = _events(strip_ansi(stdout))
        messages = [
            e["item"].get("text", "")
            for e in events
            if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"
        ]
        errors = [
            str(e.get("message") or (e.get("error") or {}).get("message") or "")
            for e in events
            if e.get("type") in ("error", "turn.failed")
        ]
        errors += [
            str(e["item"].get("message") or "")
            for e in events
            if e.get("type") == "item.completed" and e["item"].get("type") == "error"
        ]
        failed_changes = [
            e["item"]
            for e in events
            if e.get("type") == "item.completed"
            and e["item"].get("type") == "file_change"
            and e["item"].get("status") == "failed"
        ]
        usage: dict[str, Any] = {}
        for e in events:
            if e.get("type") == "turn.completed":
                usage = e.get("usage") or {}
        thread = next(
            (e.get("thread_id") for e in events if e.get("type") == "thread.started"), None
        )
        completed = any(e.get("type") == "turn.completed" for e in events)
        result = WorkerResult(
            ok=exit_code == 0
            and completed
            and not any(e.get("type") == "turn.failed" for e in events),
            text=messages[-1] if messages else "",
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            session_id=thread,
            num_turns=sum(1 for e in events if e.get("type") == "item.completed"),
            permission_denials=failed_changes,
        )
        if not result.ok:
            detail = (
                "; ".join(dict.fromkeys(m for m in errors if m))
                or strip_ansi(stderr).strip()[-1500:]
                or f"codex exited with code {exit_code}"
            )
            result.error = detail
            result.error_kind = classify_message(detail)
            result.retry_after = retry_after_seconds(detail)
        return result

    def progress(self, line: str) -> str | None:
        try:
            event = json.loads(line)
        except ValueError:
            return None
        if not isinstance(event, dict) or event.get("type") != "item.completed":
            return None
        item = event.get("item") or {}
        kind = item.get("type")
        if kind == "command_execution":
            return f"→ $ {str(item.get('command', ''))[:90]} (exit {item.get('exit_code')})"
        if kind == "file_change":
            return f"→ file change {item.get('status')}"
        if kind == "agent_message":
            text = str(item.get("text", "")).strip()
            return text.splitlines()[0][:100] if text else None
        return None


def _events(text: str) -> list[dict[str, Any]]:
    events = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            if "item" in value and not isinstance(value["item"], dict):
                continue
            events.append(value)
    return events
