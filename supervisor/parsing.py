"""Turning a worker's final text into a validated result, strictly.

There is no marker-string fallback: text that merely says "APPROVED" approves nothing. Models do
wrap JSON in prose and code fences, so the block is found first and then validated in full.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from supervisor.errors import ParsingError

FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(.*?)\n[ \t]*```", re.DOTALL)
ANSI_ESCAPE = re.compile(r"\x1B(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])")

M = TypeVar("M", bound=BaseModel)


def strip_ansi(text: str) -> str:
    return ANSI_ESCAPE.sub("", text)


def extract_json_block(text: str) -> dict[str, Any] | None:
    """The last JSON object in the text: fenced blocks first, then a bare object."""
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
        except json.JSONDecodeError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            found = value
        index = text.find("{", end)
    return found


def parse_worker_output(text: str, schema: type[M]) -> M:
    """Extract and validate; the error message is written to be fed back to the worker."""
    data = extract_json_block(text)
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
    except (json.JSONDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None
