"""`supervisor mcp`: the MCP server over stdio, on the official SDK's low-level server.

The low-level server, not a decorator framework: each tool's JSON schema and description are
written out (supervisor/mcp/tools.py) rather than inferred from Python signatures, so what a
model is offered is exactly what is reviewed. The SDK owns the protocol (the handshake, JSON-RPC,
every protocol version it speaks); this module only lists the tools and runs one per call, in a
worker thread, because the lifecycle's functions block (git, SQLite). A refusal or failure of
the lifecycle comes back as a tool error whose text is the error's cause and fix, as the
command line says them; stdout belongs to the protocol, so nothing else is printed there.
"""

from __future__ import annotations

import json
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from supervisor import __version__
from supervisor.core.errors import SupervisorError
from supervisor.mcp import tools
from supervisor.mcp.scope import Scope, bounded
from supervisor.workspace.host_git import find_repo_root

if TYPE_CHECKING:
    from pathlib import Path

INSTRUCTIONS = (
    "Starts and watches supervised coding tasks in one repository: sandboxed AI workers "
    "implement a task on a branch, gates check it, and people approve what needs approval. "
    "You can start, follow, diff, resume and abandon tasks; approving, trusting and "
    "configuring are a person's, outside this server."
)


def make_server(scope: Scope) -> Server[Any]:
    """The server for the repository `scope` serves."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=t.name, description=t.description, input_schema=t.schema)
                for t in tools.TOOLS
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = dict(params.arguments or {})
        try:
            result = await anyio.to_thread.run_sync(partial(tools.call, scope, params.name, args))
        except SupervisorError as e:
            return _error(f"{e.message} Fix: {e.hint}" if e.hint else e.message)
        except (KeyError, TypeError, ValueError) as e:  # arguments the schema should have refused
            return _error(f"Invalid arguments for {params.name}: {e!r}.")
        text = json.dumps(result, ensure_ascii=True, indent=1)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=result
        )

    return Server(
        "supervisor",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _error(text: str) -> types.CallToolResult:
    shown = bounded(text)
    return types.CallToolResult(content=[types.TextContent(type="text", text=shown)], is_error=True)


def serve(repo: Path) -> None:
    """Serve the repository that holds `repo` over stdin/stdout until the client closes them."""
    scope = Scope(find_repo_root(repo).resolve())
    server = make_server(scope)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)
