"""The set-up lines of docs/mcp.md, read by the real CLIs' own configuration parsing: what the
page tells a person to type or write must be what `claude` and `codex` take as the `supervisor`
MCP server (`supervisor` with the argument `mcp`, over stdio).

Taken from the page itself, so the page and this spec cannot say different things. `claude mcp
get` and `claude mcp list` health-check every server (about 20 s each here), so claude's is read
from the file its `mcp add` wrote; codex lists its configuration without starting anything.
Gemini CLI's lines are not run here: its start alone costs ~4 CPU-s.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e_support import missing

from supervisor.lifecycle.demo import make_demo_repo

pytestmark = pytest.mark.cli
ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "mcp.md"
BIN = ROOT / "node_modules" / ".bin"


def block_after(text: str, opening: str) -> str:
    """The indented code block whose first line starts with `opening`."""
    match = re.search(rf"^    {re.escape(opening)}.*?(?=\n\S|\Z)", text, re.M | re.S)
    assert match, f"docs/mcp.md has no code block starting with {opening!r}"
    return "\n".join(line.removeprefix("    ") for line in match.group(0).splitlines())


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{argv}: {done.stdout}{done.stderr}"
    return done.stdout


@pytest.fixture
def home(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    for cli in ("claude", "codex"):
        if not (BIN / cli).exists():
            missing(f"the {cli} binary is not installed at {BIN} (npm ci)")
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    return home, env


def test_claude_takes_the_pages_add_line_as_the_supervisor_server(
    tmp_path: Path, home: tuple[Path, dict[str, str]]
) -> None:
    folder, env = home
    repo = make_demo_repo(tmp_path / "repo").resolve()
    line = block_after(PAGE.read_text(), "claude mcp add")
    argv = shlex.split(line)
    run([str(BIN / "claude"), *argv[1:]], repo, env)
    stored: dict[str, Any] = json.loads((folder / ".claude.json").read_text())
    server = stored["projects"][str(repo)]["mcpServers"]["supervisor"]
    assert (server["type"], server["command"], server["args"]) == ("stdio", "supervisor", ["mcp"])


def test_codex_takes_the_pages_table_as_the_supervisor_server(
    tmp_path: Path, home: tuple[Path, dict[str, str]]
) -> None:
    folder, env = home
    (folder / ".codex").mkdir()
    (folder / ".codex" / "config.toml").write_text(
        block_after(PAGE.read_text(), "[mcp_servers.supervisor]") + "\n"
    )
    listed = json.loads(run([str(BIN / "codex"), "mcp", "list", "--json"], tmp_path, env))
    [server] = [s for s in listed if s["name"] == "supervisor"]
    transport = server["transport"]
    assert (transport["type"], transport["command"], transport["args"]) == (
        "stdio",
        "supervisor",
        ["mcp"],
    )
    assert server["enabled"] is True


def test_the_pages_gemini_settings_are_json_naming_the_same_server() -> None:
    settings = json.loads(block_after(PAGE.read_text(), "{"))
    assert settings["mcpServers"]["supervisor"] == {"command": "supervisor", "args": ["mcp"]}
