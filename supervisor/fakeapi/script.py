"""The script a scripted model follows: conversations of turns, in a vendor-neutral form.

A new conversation (a request with no assistant turn yet) takes the first unused conversation
whose `when` text appears in the request; later requests of that conversation are matched back to
it by their first user message, and answered by the turn whose index is the number of assistant
turns already in the request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolUse(_Model):
    name: str
    input: dict[str, Any]


class HttpError(_Model):
    status: int = Field(ge=400, le=599)
    message: str = "scripted error"
    retry_after: float | None = None


class Turn(_Model):
    delay: float = Field(0.0, ge=0)
    text: str | None = None
    tool_use: ToolUse | None = None
    error: HttpError | None = None

    @model_validator(mode="after")
    def _one_answer(self) -> Turn:
        if sum(x is not None for x in (self.text, self.tool_use, self.error)) != 1:
            raise ValueError("a turn answers with exactly one of text, tool_use or error")
        return self


class Conversation(_Model):
    when: str | None = None
    repeat: bool = False
    turns: list[Turn] = Field(min_length=1)


class Script(_Model):
    conversations: list[Conversation] = Field(default_factory=list)


def load_script(source: dict[str, Any] | str | Path | Script) -> Script:
    """A script from a dict, a YAML file path, or a Script."""
    if isinstance(source, Script):
        return source
    if isinstance(source, (str, Path)):
        source = yaml.safe_load(Path(source).read_text(encoding="utf-8")) or {}
    return Script.model_validate(source)
