"""The OpenAI Responses API as Codex CLI uses it (`POST /v1/responses`, streamed SSE).

A scripted `Write` becomes an `exec_command` call that writes the file with a shell here-document,
and `Read` a `cat`: Codex offers those tools to every model, and the worktree check afterwards is
the same whichever tool wrote the file.
"""

from __future__ import annotations

import json
import re
import shlex
import uuid
from pathlib import PurePosixPath
from typing import Any

from supervisor.fakeapi import schema_rules
from supervisor.fakeapi.script import Turn

PATH = "/v1/responses"
CWD = re.compile(r"<cwd>(.*?)</cwd>")
HEREDOC_END = "__SUPERVISOR_EOF__"


def handles(path: str) -> bool:
    return path.endswith(PATH)


def _texts(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(part.get("text", "")) for part in content or [] if isinstance(part, dict))


def request_text(body: dict[str, Any]) -> str:
    parts = [str(body.get("instructions") or "")]
    for item in body.get("input") or []:
        if isinstance(item, dict):
            parts.append(
                _texts(item)
                if item.get("type", "message") == "message"
                else str(item.get("output") or item.get("arguments") or "")
            )
    return "\n".join(parts)


def opening(body: dict[str, Any]) -> str:
    """Every user message before the model's first turn: Codex sends its environment context
    as a user message of its own, so the prompt is not always the first one."""
    texts = []
    for item in body.get("input") or []:
        if not isinstance(item, dict):
            continue
        if (
            item.get("type") in ("function_call", "custom_tool_call")
            or item.get("role") == "assistant"
        ):
            break
        if item.get("role") == "user":
            texts.append(_texts(item))
    return "\n".join(texts)


def turn_index(body: dict[str, Any]) -> int:
    count = 0
    for item in body.get("input") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") in ("function_call", "custom_tool_call") or (
            item.get("type", "message") == "message" and item.get("role") == "assistant"
        ):
            count += 1
    return count


def _tool_item(turn: Turn, body: dict[str, Any]) -> dict[str, Any]:
    assert turn.tool_use is not None
    args = turn.tool_use.input
    path = str(args.get("file_path", ""))
    if turn.tool_use.name == "Write":
        content = str(args.get("content", ""))
        if not content.endswith("\n"):
            content += "\n"
        # As the model would: the file's folder made first (claude's Write tool makes it).
        folder = shlex.quote(str(PurePosixPath(path).parent))
        cmd = (
            f"mkdir -p {folder} && cat > {shlex.quote(path)} <<'{HEREDOC_END}'\n"
            f"{content}{HEREDOC_END}"
        )
    elif turn.tool_use.name == "Read":
        cmd = f"cat {shlex.quote(path)}"
    else:
        cmd = str(args.get("command") or args.get("cmd") or "true")
    return {
        "type": "function_call",
        "id": f"fc_{uuid.uuid4().hex[:24]}",
        "call_id": f"call_{uuid.uuid4().hex[:24]}",
        "name": "exec_command",
        "arguments": json.dumps({"cmd": cmd, "tty": False}),
        "status": "completed",
    }


def _message_item(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def answer(turn: Turn, body: dict[str, Any]) -> tuple[str, list[bytes]]:
    """Content type and body chunks of a successful answer."""
    item = _tool_item(turn, body) if turn.tool_use is not None else _message_item(turn.text or "")
    response_id = f"resp_{uuid.uuid4().hex[:24]}"
    usage: dict[str, Any] = {
        "input_tokens": max(1, len(json.dumps(body)) // 4),
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": max(1, len(json.dumps(item)) // 4),
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 0,
    }
    usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    base: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "model": body.get("model"),
        "output": [],
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": {**base, "status": "in_progress"}}),
        ("response.output_item.added", {"output_index": 0, "item": item}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        (
            "response.completed",
            {"response": {**base, "status": "completed", "output": [item], "usage": usage}},
        ),
    ]
    chunks = [
        f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()
        for name, data in events
    ]
    return "text/event-stream", chunks


def refusal(body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """The 400 the real API answers to a strict output schema it does not accept
    (`codex --output-schema` sends `text.format`: json_schema, strict)."""
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema" or not fmt.get("strict"):
        return None
    message = schema_rules.openai_refusal(str(fmt.get("name") or ""), fmt.get("schema"))
    if message is None:
        return None
    error = {
        "message": message,
        "type": "invalid_request_error",
        "param": "text.format.schema",
        "code": "invalid_json_schema",
    }
    return 400, {"error": error}


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "code": kind, "param": None}}


def workdir(body: dict[str, Any]) -> str | None:
    match = CWD.search(request_text(body))
    return match.group(1).strip() if match else None
