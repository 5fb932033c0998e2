"""A scripted stand-in for the model APIs, answering the real CLI binaries over HTTP.

No network and no real model are needed to run the real `claude`/`codex`/`gemini` binaries end
to end: the script decides each answer, and the server records what the CLI sent.
"""

from supervisor.fakeapi.script import (
    Choice,
    Conversation,
    HttpError,
    Script,
    ScriptPlayer,
    ToolUse,
    Turn,
    load_script,
)
from supervisor.fakeapi.server import Recorded, ScriptedModelServer

__all__ = [
    "Choice",
    "Conversation",
    "HttpError",
    "Recorded",
    "Script",
    "ScriptPlayer",
    "ScriptedModelServer",
    "ToolUse",
    "Turn",
    "load_script",
]
