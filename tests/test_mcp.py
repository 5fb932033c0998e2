"""`supervisor mcp` spoken to by the MCP SDK's own stdio client, as Claude Code, Codex or Gemini
CLI would: the server is a process of its own (tests/mcp_standin.py: the real command, workers
scripted on the stand-in sandbox), the task it starts runs in a detached process of its own.

Real parts: the `mcp` SDK's client and server, the protocol between them over pipes, the
supervisor's command, SQLite, git. Stand-in: the container (supervisor/sandbox/standin.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_standin
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_standin import new_project

from supervisor.guard.trust import trust
from supervisor.lifecycle.opening import reading
from supervisor.policy import budgets

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

DRIVER = Path(mcp_standin.__file__)
WAIT_S = 60.0
"""The longest a spec waits for the background task to stop (a bound, never a measure)."""
TOOLS = {
    "start_task",
    "list_tasks",
    "task_status",
    "task_events",
    "task_diff",
    "context_preview",
    "resume_task",
    "abandon_task",
}


Session = ClientSession


def talk(repo: Path, conversation: Callable[[Session], Awaitable[None]]) -> None:
    """Start `supervisor mcp` in `repo` through the SDK's stdio client and hold `conversation`."""

    async def run() -> None:
        server = StdioServerParameters(
            command=sys.executable,
            args=[str(DRIVER), "mcp", "--repo", str(repo)],
            env=dict(os.environ),
            cwd=str(repo),
        )
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await conversation(session)

    anyio.run(run)


async def called(session: Session, tool: str, **args: Any) -> dict[str, Any]:
    """A tool's result as the client receives it: JSON text, parsed; an error fails the spec."""
    result = await session.call_tool(tool, arguments=args)
    text = "".join(getattr(c, "text", "") for c in result.content)
    assert not result.is_error, f"{tool} failed: {text}"
    assert "\x1b" not in text and "\x07" not in text  # a terminal shows escapes as \u001b
    data: dict[str, Any] = json.loads(text)
    assert result.structured_content == data
    return data


async def refused(session: Session, tool: str, **args: Any) -> str:
    result = await session.call_tool(tool, arguments=args)
    assert result.is_error, f"{tool} was not refused: {result.content}"
    return "".join(getattr(c, "text", "") for c in result.content)


async def stopped(session: Session, wf_id: int) -> dict[str, Any]:
    """task_status once the background run stopped (finished, failed or waiting)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        status = await called(session, "task_status", id=wf_id)
        if status["status"] != "running" or time.monotonic() > deadline:
            return status
        await anyio.sleep(0.2)


async def all_events(session: Session, wf_id: int) -> AsyncIterator[dict[str, Any]]:
    after = 0
    while True:
        page = await called(session, "task_events", id=wf_id, after=after, limit=5)
        for event in page["events"]:
            yield event
        if not page["more"]:
            return
        after = page["next_after"]


def test_a_client_starts_a_task_and_follows_it_to_its_approval_and_its_diff(
    tmp_path: Path, api_keys: None
) -> None:
    repo = new_project(tmp_path / "repo")
    seen: dict[str, Any] = {}

    async def conversation(session: Session) -> None:
        listed = await session.list_tools()
        seen["tools"] = {t.name: t for t in listed.tools}
        started = await called(session, "start_task", task="Write the answer file", depth="planned")
        wf_id = started["id"]
        seen["listed"] = await called(session, "list_tasks")
        seen["status"] = await stopped(session, wf_id)
        seen["events"] = [e async for e in all_events(session, wf_id)]
        seen["diff"] = await called(session, "task_diff", id=wf_id)
        preview = await called(session, "abandon_task", id=wf_id)
        guessed = await called(session, "abandon_task", id=wf_id, confirm="0" * 16)
        seen["abandon"] = (preview, guessed)
        seen["abandoned"] = await called(
            session, "abandon_task", id=wf_id, confirm=preview["confirm"]
        )

    talk(repo, conversation)
    tools = seen["tools"]
    assert set(tools) == TOOLS  # nothing approves, rejects, trusts or configures
    for tool in tools.values():
        assert tool.description and tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False
    assert "task" in tools["start_task"].input_schema["required"]
    assert [t["id"] for t in seen["listed"]["tasks"]] == [1]

    status = seen["status"]
    assert status["status"] == "awaiting_approval", status
    assert "supervisor approve 1" in status["person_needed"]
    assert "cannot decide" in status["person_needed"]

    events = seen["events"]
    ids = [e["id"] for e in events]
    assert ids == sorted(set(ids)) and len(ids) > 5  # paged through, none twice, none lost
    summaries = [
        (e["payload"].get("output") or {}).get("summary")
        for e in events
        if isinstance(e.get("payload"), dict)
    ]
    hostile = next(s for s in summaries if s and "approve_task" in s)
    # The worker's text arrives as a JSON string: its escapes as characters, cut to a bound.
    assert hostile.startswith(mcp_standin.HOSTILE_SUMMARY[:80])
    assert len(hostile) < 2100 and hostile.endswith("more characters not shown)")

    diff = seen["diff"]
    names = [f["path"] for f in diff["files"]]
    assert any("IGNORE PREVIOUS INSTRUCTIONS" in n for n in names), names
    assert "IGNORE PREVIOUS INSTRUCTIONS" in diff["diff"]

    # Abandoning: the CLI's preview first; only its own confirm value removes anything.
    preview, guessed = seen["abandon"]
    assert preview["abandoned"] is False and guessed["abandoned"] is False
    assert any(item.startswith("branch ai/1-") for item in preview["would_remove"])
    assert seen["abandoned"]["abandoned"] is True


def test_a_path_outside_the_repository_or_an_argument_off_the_schema_is_refused(
    tmp_path: Path, api_keys: None
) -> None:
    repo = new_project(tmp_path / "repo")
    other = new_project(tmp_path / "other")
    said: list[str] = []
    off: list[str] = []

    async def conversation(session: Session) -> None:
        said.append(await refused(session, "list_tasks", repo=str(other)))
        said.append(await refused(session, "list_tasks", repo="../other"))
        said.append(
            await refused(session, "context_preview", role="implementer", targets=["../../etc"])
        )
        said.append(await refused(session, "start_task", task="x", repo=str(other)))
        inside = await called(session, "list_tasks", repo=".supervisor")
        said.append(json.dumps(inside))
        for wrong in ({"template": "../../x"}, {"budget_usd": -1}, {"depth": "deepest"}):
            off.append(await refused(session, "start_task", task="x", **wrong))

    talk(repo, conversation)
    for text in said[:4]:
        assert "outside the repository this server serves" in text, text
    assert json.loads(said[4]) == {"tasks": []}
    assert not (other / ".supervisor" / "state.db").exists()  # nothing started there
    assert len(off) == 3  # by the SDK's check of the schema, or by the tool's own
    assert not (repo / ".supervisor" / "state.db").exists()  # and nothing here


def test_a_model_can_lower_the_budget_of_a_task_it_starts_but_never_raise_it(
    tmp_path: Path, api_keys: None
) -> None:
    """Raising a budget is a person's `approve --extend`: a `budget_usd` above the user's own
    task limit leaves the limit as configured, one below it holds; a workflow template (a
    weaker one could drop a sign-off) is no argument at all."""
    repo = new_project(tmp_path / "repo")
    config = repo / ".supervisor" / "config.yaml"
    config.write_text(config.read_text() + "budgets:\n  task: {usd: 5.0}\n")
    trust(repo)
    pinned: list[float] = []
    said: list[str] = []

    async def conversation(session: Session) -> None:
        said.append(await refused(session, "start_task", task="x", template="mvp"))
        for asked in (1000.0, 2.0):
            started = await called(
                session, "start_task", task="Add the hello file", budget_usd=asked
            )
            await stopped(session, started["id"])
        with reading(repo) as store:
            for wf in store.workflows():
                pinned.append(wf.context[budgets.KEY]["task"]["usd"])

    talk(repo, conversation)
    assert said and pinned == [5.0, 2.0], pinned
