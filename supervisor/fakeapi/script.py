"""The script a scripted model follows: conversations of turns, in a vendor-neutral form.

A turn says *what* the model answers (text, one tool call, an HTTP error, after a delay); how that
is encoded on the wire is each vendor module's business, so one script can drive any CLI.

A new conversation (a request with no assistant turn yet) takes the first unused conversation
whose `when` text appears in the request; later requests of that conversation are matched back to
it by their first user message, and answered by the turn whose index is the number of assistant
turns already in the request.

When no unused conversation matches, a conversation that was started but never reached its last
turn is played again from the start: the run that started it broke off (a dropped connection, a
killed container) and the supervisor retried it, and a model asked the same thing answers alike.

The analyzer (supervisor/workflow/depth.py) is answered only by conversations whose `when` names
it (`ROLE: analyzer`); without one, a default verdict answers it (the fixed pipeline: `planned`,
complexity 5), so a script written for the planner, implementer and reviewer plays unchanged
behind `start-task --depth auto` and none of its conversations is spent on the analyzer.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

EXHAUSTED_TEXT = "(script exhausted)"
UNMATCHED_TEXT = "(no scripted conversation matched)"
ANALYZER_MARK = "ROLE: analyzer"
DEFAULT_VERDICT = {
    "complexity": 5,
    "path": "planned",
    "reasons": ["(the scripted API's default verdict: no conversation scripts the analyzer)"],
    "expected_files": [],
    "recommended_components": 1,
}
DEFAULT_ANALYSIS_TEXT = "Verdict.\n```json\n" + json.dumps(DEFAULT_VERDICT) + "\n```"


class _Model(BaseModel):
    # A typo in a script (`tool-use:`) must fail loudly, not silently answer with nothing.
    model_config = ConfigDict(extra="forbid")


class ToolUse(_Model):
    """One tool call; a relative `file_path` is resolved against the CLI's working directory
    by the vendor encoder, because scripts are written before the temp directory exists."""

    name: str
    input: dict[str, Any]


class HttpError(_Model):
    status: int = Field(ge=400, le=599)
    message: str = "scripted error"
    retry_after: float | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    """More response headers, as a real API sends them with a 429 (`anthropic-ratelimit-*-reset`,
    `x-ratelimit-reset-tokens`, an HTTP-date `retry-after`)."""
    retry_delay: str | None = None
    """Gemini's `RetryInfo.retryDelay` ("30s") in the error's details."""


class Turn(_Model):
    delay: float = Field(0.0, ge=0)
    after: str | None = None
    """A file on the API's host: the answer waits until it exists (at most `AFTER_LIMIT`), so a
    spec orders two workers by what it observes (a merge), not by a delay a loaded machine
    outruns."""
    pace: float = Field(0.0, ge=0)
    """Seconds between a streamed answer's events: a slow but live model."""
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
    """A script from a dict, a YAML file path, or a Script (so callers need not care which)."""
    if isinstance(source, Script):
        return source
    if isinstance(source, (str, Path)):
        source = yaml.safe_load(Path(source).read_text(encoding="utf-8")) or {}
    return Script.model_validate(source)


Outcome = Literal["scripted", "exhausted", "unmatched", "default"]


@dataclass(frozen=True)
class Choice:
    """The turn that answers a request, and why: tests assert on `outcome` and `conversation`."""

    turn: Turn
    outcome: Outcome
    conversation: int | None = None
    index: int = 0


class ScriptPlayer:
    """Chooses the turn that answers a request; thread-safe, since the CLI may call in parallel."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self._used: set[int] = set()
        self._furthest: dict[int, int] = {}  # conversation -> highest turn index handed out
        self._by_opening: dict[str, int] = {}
        self._lock = threading.Lock()

    def choose(self, opening: str, full_text: str, turn_index: int) -> Choice:
        """`opening`: the first user message; `full_text`: system prompt and all messages;
        `turn_index`: how many assistant turns the request already carries."""
        key = hashlib.sha256(opening.encode()).hexdigest()
        with self._lock:
            if key in self._by_opening:
                # Also for turn 0: the same opening again is the CLI re-sending its first request
                # (its own retry, or a side call over the same history), not a new run, and must
                # not use up the next scripted conversation.
                chosen: int | None = self._by_opening[key]
            elif turn_index == 0:
                chosen = self._take(full_text)
                if chosen is not None:
                    self._by_opening[key] = chosen
            else:
                chosen = None
            if chosen is not None:
                self._furthest[chosen] = max(self._furthest.get(chosen, -1), turn_index)
        if chosen is None and ANALYZER_MARK in full_text:
            return Choice(Turn(text=DEFAULT_ANALYSIS_TEXT), "default", None, turn_index)
        if chosen is None:
            return Choice(Turn(text=UNMATCHED_TEXT), "unmatched", None, turn_index)
        turns = self.script.conversations[chosen].turns
        if turn_index >= len(turns):
            return Choice(Turn(text=EXHAUSTED_TEXT), "exhausted", chosen, turn_index)
        return Choice(turns[turn_index], "scripted", chosen, turn_index)

    def unused(self) -> list[int]:
        """Indexes of non-repeating conversations nobody asked for: a test that expected every
        conversation to be played can assert this is empty."""
        with self._lock:
            return [
                i
                for i, c in enumerate(self.script.conversations)
                if not c.repeat and i not in self._used
            ]

    def _take(self, text: str) -> int | None:
        analyzer = ANALYZER_MARK in text
        matching = [
            i
            for i, c in enumerate(self.script.conversations)
            if (c.when is None or c.when in text)
            and (not analyzer or (c.when is not None and "analyzer" in c.when))
        ]
        for index in matching:
            if index not in self._used or self.script.conversations[index].repeat:
                self._used.add(index)
                return index
        for index in matching:
            if self._furthest.get(index, -1) < len(self.script.conversations[index].turns) - 1:
                return index  # broken off before its last turn: the retry hears it again
        return None
