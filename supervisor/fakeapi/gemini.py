"""The Gemini API as Gemini CLI uses it (`:streamGenerateContent?alt=sse`)."""

from __future__ import annotations

import json
import re
from typing import Any

from supervisor.fakeapi import schema_rules
from supervisor.fakeapi.script import Turn

WORKSPACE = re.compile(r"Workspace Directories:\**\s*\n\s*-\s*(\S+)")
CHUNK = 40
TOOL_NAMES = {"Write": "write_file", "Read": "read_file", "Bash": "run_shell_command"}


def handles(path: str) -> bool:
    return ":streamGenerateContent" in path or ":generateContent" in path


def _texts(content: dict[str, Any]) -> str:
    return "\n".join(
        str(part.get("text", "")) for part in content.get("parts") or [] if isinstance(part, dict)
    )


def request_text(body: dict[str, Any]) -> str:
    parts = [_texts(body.get("systemInstruction") or {})]
    parts += [_texts(c) for c in body.get("contents") or [] if isinstance(c, dict)]
    return "\n".join(parts)


def opening(body: dict[str, Any]) -> str:
    for content in body.get("contents") or []:
        if isinstance(content, dict) and content.get("role") == "user":
            return _texts(content)
    return ""


def turn_index(body: dict[str, Any]) -> int:
    return sum(
        1 for c in body.get("contents") or [] if isinstance(c, dict) and c.get("role") == "model"
    )


def workdir(body: dict[str, Any]) -> str | None:
    match = WORKSPACE.search(request_text(body))
    return match.group(1).rstrip("/") if match else None


def answer(turn: Turn, body: dict[str, Any]) -> tuple[str, list[bytes]]:
    if turn.tool_use is not None:
        args = dict(turn.tool_use.input)
        base = workdir(body)
        path = args.get("file_path")
        if isinstance(path, str) and not path.startswith("/") and base:
            args["file_path"] = f"{base}/{path}"
        name = TOOL_NAMES.get(turn.tool_use.name, turn.tool_use.name)
        parts: list[dict[str, Any]] = [{"functionCall": {"name": name, "args": args}}]
    else:
        parts = [{"text": turn.text or ""}]
    chunk: dict[str, Any] = {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": max(1, len(json.dumps(body)) // 4),
            "candidatesTokenCount": max(1, len(json.dumps(parts)) // 4),
            "totalTokenCount": 0,
        },
        "modelVersion": "scripted",
    }
    usage = chunk["usageMetadata"]
    usage["totalTokenCount"] = usage["promptTokenCount"] + usage["candidatesTokenCount"]
    chunks = [chunk]
    if turn.pace and turn.text:  # a slow model: the text in pieces, as the real API streams
        pieces = [turn.text[i : i + CHUNK] for i in range(0, len(turn.text), CHUNK)]
        chunks = [
            {"candidates": [{"content": {"role": "model", "parts": [{"text": p}]}, "index": 0}]}
            for p in pieces[:-1]
        ]
        last = json.loads(json.dumps(chunk))
        last["candidates"][0]["content"]["parts"] = [{"text": pieces[-1]}]
        chunks.append(last)
    return "text/event-stream", [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]


def refusal(body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """The 400 the real API answers to a response schema it does not accept. Gemini CLI sends
    `responseJsonSchema` in its own side calls (e.g. the next-speaker check)."""
    message = schema_rules.gemini_refusal(body.get("generationConfig"))
    return None if message is None else (400, error_body(400, message))


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = {
        400: "INVALID_ARGUMENT",
        401: "UNAUTHENTICATED",
        403: "PERMISSION_DENIED",
        429: "RESOURCE_EXHAUSTED",
    }.get(status, "INTERNAL")
    return {"error": {"code": status, "message": message, "status": kind}}
