"""`supervisor mcp`: parses its one option and hands the repository to the MCP server
(supervisor/mcp/server.py), which speaks the protocol on stdin/stdout until the client ends.

Only parsing here, as for every command: the server's tools call the lifecycle themselves. The
SDK is imported when the command runs, so no other command waits for it.
"""

from __future__ import annotations

from pathlib import Path

from supervisor.cli.common import RepoOption

MCP_HELP = (
    "Serve this repository's tasks to an agent session (Claude Code, Codex, Gemini CLI) over "
    "MCP on stdio: start, follow, diff, resume and abandon tasks; never approve or trust."
)
"""Given as `help=`: a docstring's line breaks would fold the summary in `supervisor -h`."""


def mcp(repo: RepoOption = Path()) -> None:
    from supervisor.mcp.server import serve

    serve(repo)
