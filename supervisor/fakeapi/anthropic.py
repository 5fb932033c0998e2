"""The Anthropic Messages API as Claude Code uses it: streamed SSE, or one JSON message.

Claude Code 2.1.x always streams (`POST /v1/messages?beta=true`, `stream: true`); the JSON form is
kept for other Anthropic SDK clients. The event sequence mirrors the real API closely enough that
the CLI's own accounting (usage, cost, stop reason) comes out with real numbers.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from supervisor.fakeapi import schema_rules
from supervisor.fakeapi.script import Turn

WORKDIR_MARKER = "Working directory: "
MESSAGES = "/v1/messages"
COUNT_TOKENS = "/v1/messages/count_tokens"
# The real API streams in small pieces; splitting makes the CLI reassemble deltas as it must live.
CHUNK = 40


def handles(path: str) -> bool:
    return path.endswith(MESSAGES)


def side_answer(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """Answers for the API's endpoints that are not a model turn, or None when not ours."""
    if path.endswith(COUNT_TOKENS):
        return 200, {"input_tokens": estimate_tokens(body)}
    return None


def refusal(body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """The 400 the real API answers to a structured-output schema it does not accept
    (`output_format`, or `output_config.format` in newer requests)."""
    for field, fmt in (
        ("output_format.schema", body.get("output_format")),
        ("output_config.format.schema", (body.get("output_config") or {}).get("format")),
    ):
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            message = schema_rules.anthropic_refusal(field, fmt.get("schema"))
            if message is not None:
                return 400, error_body(400, message)
    return None


def side_turn(body: dict[str, Any]) -> Turn | None:
    """The answer to a CLI's own side call, or None for a turn of the agent loop.

    Without CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, Claude Code 2.1.x first asks the same model
    for a session title, quoting the user's prompt; played from the script, that call would use up
    the conversation meant for the real request. The agent loop always offers tools, side calls
    offer none, so that is what tells them apart.
    """
    if body.get("tools"):
        return None
    schema = ((body.get("output_config") or {}).get("format") or {}).get("schema")
    if isinstance(schema, dict):
        return Turn(text=json.dumps(_example(schema)))
    return Turn(text="(side call)")


def _example(schema: dict[str, Any]) -> Any:
    """A small value that satisfies a JSON schema, for side calls that demand structured output."""
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties") or {}
        names = schema.get("required") or list(properties)
        return {name: _example(properties.get(name) or {}) for name in names}
    return {
        "string": "Scripted session",
        "boolean": True,
        "integer": 0,
        "number": 0,
        "array": [],
    }.get(str(kind))


def estimate_tokens(value: Any) -> int:
    """About four characters a token: close enough that downstream cost figures are realistic."""
    return max(1, len(json.dumps(value)) // 4)


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
    """The answer's content blocks and stop reason; relative tool paths become absolute because
    Claude Code's Write/Edit/Read refuse relative paths."""
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


def usage_for(body: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "input_tokens": estimate_tokens(body),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": estimate_tokens(blocks),
        "service_tier": "standard",
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


def _pieces(text: str) -> list[str]:
    return [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)] or [""]


def sse_events(body: dict[str, Any], blocks: list[dict[str, Any]], stop: str) -> list[bytes]:
    usage = usage_for(body, blocks)
    start = message(body, [], stop)
    start["stop_reason"] = None
    start["usage"] = {**usage, "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": start})]
    events.append(("ping", {}))
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            events.append(
                ("content_block_start", {"index": index, "content_block": {**block, "text": ""}})
            )
            events += [
                (
                    "content_block_delta",
                    {"index": index, "delta": {"type": "text_delta", "text": t}},
                )
                for t in _pieces(block["text"])
            ]
        else:
            events.append(
                ("content_block_start", {"index": index, "content_block": {**block, "input": {}}})
            )
            events += [
                (
                    "content_block_delta",
                    {"index": index, "delta": {"type": "input_json_delta", "partial_json": t}},
                )
                for t in _pieces(json.dumps(block["input"]))
            ]
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
    """Content type and body chunks of a successful answer (text or tool_use turn)."""
    blocks, stop = content_blocks(turn, body)
    if body.get("stream"):
        return "text/event-stream", sse_events(body, blocks, stop)
    return "application/json", [json.dumps(message(body, blocks, stop)).encode()]


ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error_body(status: int, text: str) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "api_error")
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
