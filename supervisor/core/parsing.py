"""Turning a worker's final text into a validated result, strictly.

There is no marker-string fallback: text that merely says "APPROVED" approves nothing. Models do
wrap JSON in prose and code fences, so the block is found first and then validated in full.

The answer is an adversary's text, so parsing is bounded before it starts: an answer over
MAX_ANSWER_CHARS or nested deeper than MAX_DEPTH is a ParsingError naming the bound (an object
nested 200,000 deep raised RecursionError inside `json` and took the supervisor down with it).
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from supervisor.core.errors import ParsingError

FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(.*?)\n[ \t]*```", re.DOTALL)
ANSI_ESCAPE = re.compile(r"\x1B(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])")

M = TypeVar("M", bound=BaseModel)

MAX_ANSWER_CHARS = 1_000_000
"""A final answer is a JSON result and a few paragraphs; the work itself is in the worktree."""
MAX_DEPTH = 64
"""Our answer schemas nest a few levels (a plan: phases, components, files)."""
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def nesting_depth(text: str) -> int:
    """How deep the brackets of `text` nest outside JSON strings (closers never go below 0),
    counted without recursion: an upper bound on what `json` would recurse into."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub('""', text)):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth = max(0, depth - 1)
    return deepest


def _too_deep(depth: int | None, schema_name: str = "answer") -> ParsingError:
    how = f"{depth} levels deep" if depth is not None else "too deep for the JSON parser"
    return ParsingError(
        f"The answer nests brackets {how}, over the {MAX_DEPTH} levels an answer may "
        f"nest. Answer with one fenced ```json block matching the {schema_name} schema.",
        "The worker's answer was nested too deep to parse; the step is retried with feedback.",
    )


def value_depth(value: object) -> int:
    """How deep a parsed value nests (lists and objects), counted without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack += [(child, depth + 1) for child in children]
    return deepest


def check_bounds(text: str, schema_name: str) -> None:
    """ParsingError when the answer is too large or nested too deep to parse safely."""
    if len(text) > MAX_ANSWER_CHARS:
        raise ParsingError(
            f"The answer is {len(text)} characters, over the {MAX_ANSWER_CHARS} an answer may "
            f"have. End your answer with one short fenced ```json block matching the "
            f"{schema_name} schema; the work itself belongs in the files.",
            "The worker's answer was too large to parse; the step is retried with feedback.",
        )
    depth = nesting_depth(text)
    if depth > MAX_DEPTH:
        raise _too_deep(depth, schema_name)


def strip_ansi(text: str) -> str:
    return ANSI_ESCAPE.sub("", text)


def extract_json_block(text: str) -> dict[str, Any] | None:
    """The last JSON object in the text: fenced blocks first, then a bare object. Nesting that
    makes `json` recurse past Python's limit is a ParsingError (the pre-scan in check_bounds can
    be misled by unpaired quotes; this cannot)."""
    text = strip_ansi(text)
    for block in reversed(FENCE.findall(text)):
        value = _loads_object(block)
        if value is not None:
            return value
    whole = _loads_object(text)
    if whole is not None:
        return whole
    decoder = json.JSONDecoder()
    found: dict[str, Any] | None = None
    index = text.find("{")
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except RecursionError:
            raise _too_deep(None) from None
        except json.JSONDecodeError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            found = value
        index = text.find("{", end)
    return found


def parse_worker_output(text: str, schema: type[M]) -> M:
    """Extract and validate; the error message is written to be fed back to the worker."""
    check_bounds(text, schema.__name__)
    data = extract_json_block(text)
    if data is not None and value_depth(data) > MAX_DEPTH:
        raise _too_deep(value_depth(data), schema.__name__)
    if data is None:
        raise ParsingError(
            "The answer holds no JSON block. End your answer with one fenced ```json block "
            f"matching the {schema.__name__} schema.",
            "The worker did not follow the output contract; the step is retried with feedback.",
        )
    try:
        return schema.model_validate(data)
    except ValidationError as e:
        problems = describe_validation_error(e)
        raise ParsingError(
            f"The JSON block does not match the {schema.__name__} schema: {problems}",
            "The worker's JSON broke the schema; the step is retried with the errors as feedback.",
        ) from e


def describe_validation_error(error: ValidationError) -> str:
    """pydantic's errors as `field.path: message; ...`, for people and for feedback prompts."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}"
        for err in error.errors()
    )


def _loads_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text.strip())
    except RecursionError:
        raise _too_deep(None) from None
    except (json.JSONDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None
