"""Fixtures shared by the tests that drive the real pipeline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from supervisor.fakeapi import ScriptedModelServer, load_script

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path


@pytest.fixture
def serve() -> Iterator[Callable[..., ScriptedModelServer]]:
    """Start a scripted model API on loopback from conversations; closed after the test. Every
    request is logged to stderr, which pytest shows for a failing test only."""
    servers: list[ScriptedModelServer] = []

    def start(*conversations: dict[str, Any]) -> ScriptedModelServer:
        server = ScriptedModelServer(
            load_script({"conversations": list(conversations)}), verbose=True
        )
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def api_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A private user config directory and a key for every CLI (the scripted API accepts any)."""
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(key, "test-key")
