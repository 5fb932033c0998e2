"""A scripted stand-in for the model APIs, answering the real CLI binaries on loopback."""

from supervisor.fakeapi.script import Script, load_script
from supervisor.fakeapi.server import ScriptedModelServer

__all__ = ["Script", "ScriptedModelServer", "load_script"]
