"""Each vendor's model response, streamed (SSE) or whole, decoded into one `Turn`.

Why per vendor: the witness (witness.py) must rebuild a run's final answer exactly the way the
CLI does from the same bytes, so that the CLI's stdout can be checked against it. Bounded: at
most `MAX_EVENTS` events a body, each JSON document depth-checked (`loads`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

MAX_EVENTS = 200_000
MAX_DEPTH = 64


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens


def loads(data: bytes | str) -> Any:
    """JSON, or None when it is not JSON or nests deeper than MAX_DEPTH (a RecursionError in
    the parser otherwise)."""
    if _too_deep(data):
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _too_deep(data: bytes | str) -> bool:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif char in "]}":
            depth -= 1
    return False


@dataclass
class Turn:
    """One model response: its text, whether it ended the agent loop (no tool call), usage."""

    texts: list[str] = field(default_factory=list)
    final: bool = False
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens)


class Decoder(Protocol):
    def is_model_path(self, path: str) -> bool: ...
    def decode(self, body: bytes, content_type: str) -> Turn: ...
    def answer(self, turns: list[Turn]) -> tuple[str, bool]: ...


def events(body: bytes) -> list[Any]:
    """The JSON `data:` payloads of an SSE body, in order (non-JSON ones, like `[DONE]`, left
    out)."""
    out: list[Any] = []
    text = body.decode("utf-8", "replace").replace("\r\n", "\n")
    for block in text.split("\n\n"):
        data = "\n".join(
            line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")
        )
        if data:
            value = loads(data)
            if value is not None:
                out.append(value)
            if len(out) >= MAX_EVENTS:
                break
    return out


def _documents(body: bytes, content_type: str) -> list[Any]:
    if "event-stream" in content_type or body.lstrip().startswith((b"event:", b"data:")):
        return events(body)
    value = loads(body)
    return value if isinstance(value, list) else [value]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


class Anthropic:
    """Messages API: `message_start` (usage in), content blocks by index (text deltas), and
    `message_delta` (stop reason, output tokens so far). Claude's `result` is its last turn's
    text."""

    def is_model_path(self, path: str) -> bool:
        return path.split("?", 1)[0].rstrip("/").endswith("/v1/messages")

    def decode(self, body: bytes, content_type: str) -> Turn:
        turn = Turn()
        blocks: dict[int, list[str]] = {}
        stop = None
        for doc in _documents(body, content_type):
            event = _dict(doc)
            kind = event.get("type")
            if kind == "message":  # the whole (non-streamed) form
                event = {"type": "message_start", "message": event}
                kind = "message_start"
                stop = event["message"].get("stop_reason")
                for i, block in enumerate(_list(event["message"].get("content"))):
                    if _dict(block).get("type") == "text":
                        blocks[i] = [str(block.get("text") or "")]
            if kind == "message_start":
                message = _dict(event.get("message"))
                turn.model = str(message.get("model") or "")
                usage = _dict(message.get("usage"))
                turn.input_tokens = sum(
                    _int(usage.get(k))
                    for k in (
                        "input_tokens",
                        "cache_read_input_tokens",
                        "cache_creation_input_tokens",
                    )
                )
                turn.output_tokens = _int(usage.get("output_tokens"))
            elif kind == "content_block_start":
                block = _dict(event.get("content_block"))
                if block.get("type") == "text":
                    blocks[_int(event.get("index"))] = [str(block.get("text") or "")]
            elif kind == "content_block_delta":
                delta = _dict(event.get("delta"))
                index = _int(event.get("index"))
                if delta.get("type") == "text_delta" and index in blocks:
                    blocks[index].append(str(delta.get("text") or ""))
            elif kind == "message_delta":
                stop = _dict(event.get("delta")).get("stop_reason") or stop
                usage = _dict(event.get("usage"))
                turn.output_tokens = max(turn.output_tokens, _int(usage.get("output_tokens")))
        turn.texts = ["".join(blocks[i]) for i in sorted(blocks)]
        turn.final = stop is not None and stop != "tool_use"
        return turn

    def answer(self, turns: list[Turn]) -> tuple[str, bool]:
        finals = [t for t in turns if t.final]
        if not finals:
            return "", False
        return "\n\n".join(t for t in finals[-1].texts if t), True


class OpenAI:
    """Responses API: `response.completed` carries the whole response (its output items and
    usage); codex's answer is its last assistant message."""

    def is_model_path(self, path: str) -> bool:
        return path.split("?", 1)[0].rstrip("/").endswith("/responses")

    def decode(self, body: bytes, content_type: str) -> Turn:
        turn = Turn()
        response: dict[str, Any] = {}
        items: list[Any] = []
        for doc in _documents(body, content_type):
            event = _dict(doc)
            if event.get("type") == "response.output_item.done":
                items.append(event.get("item"))
            elif event.get("type") in ("response.completed", "response.incomplete"):
                response = _dict(event.get("response"))
            elif event.get("object") == "response":  # the whole (non-streamed) form
                response = event
        if not response:
            return turn
        output = _list(response.get("output")) or items
        turn.model = str(response.get("model") or "")
        usage = _dict(response.get("usage"))
        turn.input_tokens = _int(usage.get("input_tokens"))
        turn.output_tokens = _int(usage.get("output_tokens"))
        calls = ("function_call", "custom_tool_call", "local_shell_call")
        for item in map(_dict, output):
            if item.get("type") == "message" and item.get("role", "assistant") == "assistant":
                turn.texts.append(
                    "".join(
                        str(part.get("text") or "")
                        for part in map(_dict, _list(item.get("content")))
                        if part.get("type") == "output_text"
                    )
                )
        turn.final = not any(_dict(i).get("type") in calls for i in output)
        return turn

    def answer(self, turns: list[Turn]) -> tuple[str, bool]:
        messages = [text for t in turns for text in t.texts]
        answered = bool(turns) and turns[-1].final
        return (messages[-1] if messages else ""), answered


class Gemini:
    """streamGenerateContent: each chunk a GenerateContentResponse; its parts' text (thoughts
    left out) are the turn's text, its last `usageMetadata` the turn's usage. Gemini CLI's
    stream-json prints the text of every turn, so its answer is every turn's text joined."""

    def is_model_path(self, path: str) -> bool:
        return ":streamGenerateContent" in path.split("?", 1)[0]

    def decode(self, body: bytes, content_type: str) -> Turn:
        turn = Turn(final=True)
        pieces: list[str] = []
        for doc in _documents(body, content_type):
            chunk = _dict(doc)
            for candidate in map(_dict, _list(chunk.get("candidates"))[:1]):
                for part in map(_dict, _list(_dict(candidate.get("content")).get("parts"))):
                    if "functionCall" in part:
                        turn.final = False
                    elif isinstance(part.get("text"), str) and not part.get("thought"):
                        pieces.append(part["text"])
            usage = _dict(chunk.get("usageMetadata"))
            if usage:
                turn.input_tokens = _int(usage.get("promptTokenCount"))
                turn.output_tokens = _int(usage.get("candidatesTokenCount")) + _int(
                    usage.get("thoughtsTokenCount")
                )
            turn.model = str(chunk.get("modelVersion") or turn.model)
        turn.texts = ["".join(pieces)]
        return turn

    def answer(self, turns: list[Turn]) -> tuple[str, bool]:
        text = "".join(t for turn in turns for t in turn.texts)
        return text, bool(turns) and turns[-1].final


DECODERS: dict[str, Decoder] = {"anthropic": Anthropic(), "openai": OpenAI(), "gemini": Gemini()}
