"""The Anthropic Messages API as Claude Code uses it: streamed SSE, or one JSON message."""

from __future__ import annotations

import json
import uuid
from typing import Any

from supervisor.fakeapi.script import Turn

WORKDIR_MARKER = "Working directory: "


def handles(path: str) -> bool:
    return path.endswith("/v1/messages")


def request_text(body: dict[str, Any]) -> str:
    parts = [_flatten(body.get("system"))]
    parts += [_flatten(m.get("content")) for m in body.get("messages", [])]
    return "\n".join(parts)


def opening(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if message.get("role") == "user":
            return _flatten(message.get("content"))
    return ""


def turn_index(body: dict[str, Any]) -> int:
    return sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")


def workdir(body: dict[str, Any]) -> str | None:
    text = request_text(body)
    index = text.find(WORKDIR_MARKER)
    if index == -1:
        return None
    return text[index + len(WORKDIR_MARKER) :].splitlines()[0].strip()


def content_blocks(turn: Turn, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The answer's content blocks and stop reason; relative tool paths become absolute."""
    if turn.tool_use is not None:
        arguments = dict(turn.tool_use.input)
        path = arguments.get("file_path")
        base = workdir(body)
        if isinstance(path, str) and not path.startswith("/") and base:
            arguments["file_path"] = f"{base.rstrip('/')}/{path}"
        block = {
            "type": "tool_use",
            "id": f"toolu_{uuid.uuid4().hex[:24]}",
            "name": turn.tool_use.name,
            "input": arguments,
        }
        return [block], "tool_use"
    return [{"type": "text", "text": turn.text or ""}], "end_turn"


def usage_for(body: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, int]:
    return {
        "input_tokens": max(1, len(json.dumps(body)) // 4),
        "output_tokens": max(1, len(json.dumps(blocks)) // 4),
    }


def message(body: dict[str, Any], blocks: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "scripted"),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage_for(body, blocks),
    }


def sse_events(body: dict[str, Any], blocks: list[dict[str, Any]], stop: str) -> list[bytes]:
    usage = usage_for(body, blocks)
    start = message(body, [], stop)
    start["stop_reason"] = None
    start["usage"] = {"input_tokens": usage["input_tokens"], "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": start})]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            events.append(
                (
                    "content_block_start",
                    {"index": index, "content_block": {"type": "text", "text": ""}},
                )
            )
            events.append(
                (
                    "content_block_delta",
                    {"index": index, "delta": {"type": "text_delta", "text": block["text"]}},
                )
            )
        else:
            empty = {**block, "input": {}}
            events.append(("content_block_start", {"index": index, "content_block": empty}))
            events.append(
                (
                    "content_block_delta",
                    {
                        "index": index,
                        "delta": {
                            "type": "input_json_delta",
                            "partial_json": json.dumps(block["input"]),
                        },
                    },
                )
            )
        events.append(("content_block_stop", {"index": index}))
    events.append(
        (
            "message_delta",
            {
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {}))
    return [
        f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()
        for name, data in events
    ]


def answer(turn: Turn, body: dict[str, Any]) -> tuple[str, list[bytes]]:
    blocks, stop = content_blocks(turn, body)
    if body.get("stream"):
        return "text/event-stream", sse_events(body, blocks, stop)
    return "application/json", [json.dumps(message(body, blocks, stop)).encode()]


def error_body(status: int, text: str) -> dict[str, Any]:
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": text}}


def _flatten(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for block in content:
            if isinstance(block, dict):
                if "text" in block:
                    out.append(str(block["text"]))
                elif block.get("type") == "tool_result":
                    out.append(_flatten(block.get("content")))
            else:
                out.append(str(block))
        return "\n".join(out)
    return str(content)
