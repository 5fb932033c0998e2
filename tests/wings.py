"""The house's one table: every wing of the package, its floor, what it does, and the modules other
wings may import from it.

tests/test_import_cycles.py enforces it (a wing imports only from wings on lower floors, at
module level, inside functions and under TYPE_CHECKING alike, and only their public modules), and
docs/wings.md is rendered from it (scripts/docs_pages.py; tests/test_docs_site.py fails when the
page is stale). A change that needs another wing's private module, or a wing above its own, is
asking for something to move: down to where both can reach it, or up to where the caller is.
"""

from __future__ import annotations

from typing import NamedTuple

ALL = frozenset({"*"})


class Wing(NamedTuple):
    floor: int
    does: str
    public: frozenset[str]
    """Modules (dotted below the wing) other wings may import; ALL: every one (a toolbox)."""


def _public(names: str) -> frozenset[str]:
    return frozenset(names.split())


WINGS: dict[str, Wing] = {
    "core": Wing(
        0,
        "the foundations: errors, settings and their loading, schemas of answers, parsing, process "
        "helpers, redaction, the trust map and the projects' model that settings are read through",
        ALL,
    ),
    "fakeapi": Wing(
        1,
        "the scripted model API on 127.0.0.1 that the demo and the specs answer the real CLIs with",
        _public("anthropic script"),
    ),
    "state": Wing(
        2,
        "durable, typed state: the schema, the store, the fast reader and writer, locks, leases; "
        "SQLite or PostgreSQL",
        _public(
            "gate_history leases location locks postgres reader records registry runner_view "
            "schema shared_lock status_label store web_tokens writer"
        ),
    ),
    "guard": Wing(
        3,
        "the trust boundary: `supervisor trust`, protected paths, safe reads of repository files, "
        "credentials and their placeholders, text made safe for terminals",
        _public("credentials placeholders protected reading textsafe trust visible"),
    ),
    "telemetry": Wing(
        3,
        "each run's OpenTelemetry traces and metrics, made after the run from the state and the "
        "proxy's record; off by default, imported only when on",
        _public("switch"),
    ),
    "workspace": Wing(
        4,
        "git: worktrees, copy-on-write views, candidates read as blobs, the team's remote",
        _public(
            "candidate_tree fetch_back host_git overlay overlay_advance remote treedata worktrees"
        ),
    ),
    "sandbox": Wing(
        5,
        "containers, egress, the credential proxy (the witness of every model call), adoption, "
        "gVisor",
        _public(
            "adopt base container_ops docker egress engine_loss engine_version model_paths probed "
            "run_files runtime warm"
        ),
    ),
    "project": Wing(
        6,
        "the target project: its stack, toolchains, projects of a monorepo, image, imports",
        _public(
            "detect imports project_image shadowing toolchain_check toolchain_resolve "
            "toolchain_sources toolchains workspaces"
        ),
    ),
    "workers": Wing(
        6,
        "one adapter per AI CLI behind one interface, and the proxy's witness of each run",
        _public("base structured_output witness"),
    ),
    "gates": Wing(
        7,
        "the checks a candidate must pass, in one place: the commands, the tests pinned from the "
        "base, running them with no network, counting results, reuse by tree, the base oracle",
        _public(
            "asking base_oracle base_tests baseline failure_summary per_project problems reuse run "
            "test_counts test_pins"
        ),
    ),
    "context": Wing(
        8,
        "what a worker sees: roles and role packs, context strategies, packing with Repomix, "
        "prompts, token budgets",
        _public(
            "ahead assemble interfaces packs.api packs.manifest packs.scaffold packs.store "
            "plan_view project_scope prompts roles targets"
        ),
    ),
    "policy": Wing(
        9,
        "what decide() consults about people and money: risk, the approval policy, approvals, "
        "budgets, notifications, dependency review, retry policies and the breaker",
        _public("approval_policy approvals budgets dependency_review notify recovery risk"),
    ),
    "routing": Wing(
        10,
        "which CLI runs a role: preference, failover, metrics and adaptive assignment",
        _public("failover history metrics pools route suggest"),
    ),
    "forge": Wing(
        10,
        "GitHub and GitLab behind one interface (PyGithub, python-gitlab): pull requests, issues, "
        "the gated push, the user's token kept on the host, the body written from the state",
        _public("base body connect push target tokens"),
    ),
    "workflow": Wing(
        11,
        "decide (a pure function) and act (one module per step kind); the engine, the only writer "
        "of progress",
        _public(
            "continuation depth engine gate_wiring history loading resuming steps.base "
            "steps.components steps.dispatched steps.subplan"
        ),
    ),
    "lifecycle": Wing(
        12,
        "one module per thing a person does to a task or a repository: start, resume, approve, "
        "complete, abandon, init, doctor, the demo",
        ALL,
    ),
    "temporal": Wing(
        13,
        "team mode: the same engine run by Temporal workers, one step per activity",
        _public("client link submit worker"),
    ),
    "evals": Wing(
        13,
        "`supervisor eval`: the shipped suite of small tasks in three variants (normal, one-off "
        "and conflicting impossible), run through the lifecycle and counted: resolved, cheated, "
        "stopped honestly, caught; the scripted honest and cheating workers; the Harbor agent",
        _public("report runner scripted suite swebench"),
    ),
    "views": Wing(
        14,
        "what a person sees of a task, shared by the faces: detail, work tree, listings, tables",
        _public("detail facts listing listings monitor render tables"),
    ),
    "tui": Wing(
        15, "the terminal screen (Textual): workflows, their tree, approvals", _public("app keys")
    ),
    "mcp": Wing(
        15,
        "the MCP server (the official SDK, over stdio): an agent session starts and watches tasks "
        "through tools that never approve, trust or configure",
        _public("server"),
    ),
    "web": Wing(
        15,
        "the dashboard in a browser (Starlette, server-sent events): every task of every "
        "repository, live, with approvals; signed in, same-origin only",
        _public("serve"),
    ),
    "cli": Wing(
        16, "the command line (typer): parses, calls the lifecycle, renders", _public("entry")
    ),
    "__main__": Wing(17, "`python -m supervisor`", frozenset()),
}


def page() -> str:
    """docs/wings.md: the table, top floor first, as a newcomer reads the house."""
    lines = [
        "# The house on one screen: wings and the direction of imports",
        "",
        "Every wing sits on a floor and imports only from wings on lower floors: at module "
        "level, inside functions and under `TYPE_CHECKING` alike, and only the modules a wing "
        "lists as public. `tests/test_import_cycles.py` enforces it from the table in "
        "`tests/wings.py`, from which this page is generated (`scripts/docs_pages.py`).",
        "",
        "| floor | wing | what it does | other wings may import |",
        "|---|---|---|---|",
    ]
    for name, wing in sorted(WINGS.items(), key=lambda item: (-item[1].floor, item[0])):
        public = "every module" if wing.public == ALL else ", ".join(sorted(wing.public)) or "—"
        lines.append(f"| {wing.floor} | `{name}` | {wing.does} | {public} |")
    lines += [
        "",
        "Why this order: the settings are read through the trust map and the projects' model, so "
        "those sit with the foundations; state is below the trust boundary because every wing "
        "records through it; git (workspace) is below the containers that mount its worktrees; "
        "the project and the workers both stand on the sandbox and neither needs the other; "
        "the gates run what the project defines, in the sandbox; context packs what the project, "
        "the workers and the gates define; policy and routing are what the "
        "workflow consults; the lifecycle drives the workflow, and team mode drives the "
        "lifecycle's pieces from Temporal; the faces (views, the TUI, the MCP server, the CLI) "
        "only render and call the lifecycle.",
        "",
    ]
    return "\n".join(lines)
