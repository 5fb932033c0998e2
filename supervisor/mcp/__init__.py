"""The MCP server: a person's own agent session (Claude Code, Codex, Gemini CLI) starts and
watches this repository's tasks through tools, over stdio, on the official `mcp` SDK.

A face like the command line and the TUI: it parses a tool's arguments, keeps them inside the
repository it serves, calls the same lifecycle functions and renders their result as JSON. The
model behind the client is the text attacker of the trust map, so no tool approves, trusts or
writes configuration: those stay with a person (`supervisor approve`, `trust`, the TUI).
"""
