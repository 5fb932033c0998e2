"""A monorepo's project map is pinned when a task starts, as its gate commands are: which
projects a change reaches, what a component may touch and which gates run are decided by the
map the task started with. A project added, removed or rewired in the configuration mid-task (a
person's edit, a pull) or after a failure changes only later tasks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from test_engine_fast import Project, project, warm_packer, writes

from supervisor.core.config import Settings
from supervisor.core.errors import ApprovalRequired
from supervisor.gates import per_project as project_gates
from supervisor.guard import protected
from supervisor.lifecycle import tasks
from supervisor.workflow import resuming

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["project", "warm_packer"]

STARTED = {
    "gates": {"test": "make test"},
    "projects": [
        {"name": "types", "path": "packages/types", "gates": {"test": "tsc"}},
        {"name": "web", "path": "apps/web", "gates": {"test": "vitest run"}},
        {"name": "cli", "path": "apps/cli", "gates": {"test": "vitest run"}},
    ],
    "cross_project_dependencies": {"web": {"depends_on": ["types"]}},
    "shared_paths": ["pnpm-lock.yaml"],
}
LATER = {  # mid-task: cli now depends on types, docs is new, the lock file no longer shared
    "gates": {"test": "make test"},
    "projects": [
        {"name": "types", "path": "packages/types", "gates": {"test": "true"}},
        {"name": "web", "path": "apps/web", "gates": {"test": "true"}},
        {"name": "cli", "path": "apps/cli", "gates": {"test": "true"}},
        {"name": "docs", "path": "apps/docs"},
    ],
    "cross_project_dependencies": {
        "cli": {"depends_on": ["types"]},
        "docs": {"depends_on": ["types"]},
    },
}


def started_context(config: dict[str, Any] = STARTED) -> dict[str, Any]:
    return dict(protected.pinned_start(Settings.model_validate(config), None)["context"])


def gated(context: dict[str, Any], settings: Settings, changed: list[str]) -> list[Any]:
    projects = protected.project_map(context, settings)
    pins = protected.pinned(context, settings)
    chosen = project_gates.choose(
        projects, "test", pins.gates["test"], changed, pinned=pins.project_gates
    )
    return [(g.project, g.reason, g.command) for g in chosen or []]


def test_a_change_to_the_shared_types_reaches_the_projects_the_task_started_with() -> None:
    later = Settings.model_validate(LATER)

    assert gated(started_context(), later, ["packages/types/src/index.ts"]) == [
        ("types", "changed (packages/types/src/index.ts)", "tsc"),
        ("web", "depends on types", "vitest run"),  # cli and docs: not in the pinned map
    ]
    assert gated({}, later, ["packages/types/src/index.ts"]) == [  # no pins: today's map
        ("types", "changed (packages/types/src/index.ts)", "true"),
        ("cli", "depends on types", "true"),
        ("docs", "depends on types", "make test"),  # no gates of its own
    ]


def test_the_pinned_shared_paths_and_ownership_decide_what_a_component_may_touch() -> None:
    projects = protected.project_map(started_context(), Settings.model_validate(LATER))

    assert projects.names == ["types", "web", "cli"]
    assert projects.may_touch("cli", "pnpm-lock.yaml")  # shared when the task started
    assert projects.project_of("apps/docs/index.md") is None  # docs came later


def test_the_start_event_records_the_pinned_map() -> None:
    started = protected.pinned_start(Settings.model_validate(STARTED), None)

    payload = started["events"][0].payload["projects"]
    assert [p["name"] for p in payload["projects"]] == ["types", "web", "cli"]
    assert payload["cross_project_dependencies"] == {"web": {"depends_on": ["types"]}}
    assert payload["shared_paths"] == ["pnpm-lock.yaml"]


def test_a_single_project_task_stays_one_when_projects_are_configured_mid_task() -> None:
    context = started_context({"gates": {"test": "make test"}})

    assert not protected.project_map(context, Settings.model_validate(LATER))
    assert gated(context, Settings.model_validate(LATER), ["apps/web/a.ts"]) == []


def test_resuming_after_a_failure_repins_the_repository_gates_but_keeps_the_map() -> None:
    context = started_context()
    later = Settings.model_validate({**LATER, "gates": {"test": "make check"}})

    events = resuming.repin_gates(context, later)

    assert [e.type for e in events] == ["checks_pinned"]  # the person fixed the gate
    assert protected.pinned(context, later).gates == {"test": "make check"}
    assert protected.project_map(context, later).names == ["types", "web", "cli"]


def test_a_task_started_before_maps_were_pinned_uses_todays_map() -> None:
    context = started_context()
    del context[protected.PINNED_KEY]["projects"]

    assert protected.project_map(context, Settings.model_validate(LATER)).names == [
        "types",
        "web",
        "cli",
        "docs",
    ]


# -- on the real engine, SQLite and git with the stand-in sandbox (tests/test_engine_fast.py) ----

WAITS_THEN_GATES = """implement
  steps:
    implement: {role: implementer, next: test, human_approval: true}
    test: {gate: test, next: commit, on_fail: implement}
    commit: {action: commit}
"""
PROJECTS = """projects:
  - {name: types, path: packages/types, gates: {test: 'true'}}
  - {name: web, path: apps/web, gates: {test: 'true'}}
cross_project_dependencies:
  web: {depends_on: [types]}
"""
ADDED_WHILE_WAITING = """  - {name: docs, path: apps/docs, gates: {test: 'exit 1'}}
  - {name: admin, path: apps/admin, gates: {test: 'exit 1'}}
"""


def test_a_project_added_while_the_task_waits_runs_no_gate_when_it_resumes(
    project: Callable[..., Project],
) -> None:
    p = project(
        WAITS_THEN_GATES,
        {"test": "true"},
        ("ROLE: implementer", writes({"apps/web/page.txt": "hello\n"})),
    )
    for directory in ("packages/types", "apps/web", "apps/docs", "apps/admin"):
        (p.root / directory).mkdir(parents=True)
        (p.root / directory / "README.md").write_text(directory + "\n")
    p.git("add", "-A")
    p.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "packages")
    config = p.root / ".supervisor" / "config.yaml"
    config.write_text(config.read_text() + PROJECTS)
    with pytest.raises(ApprovalRequired):
        p.start()

    # While it waits, the configuration gains two projects building on web, whose gates fail,
    # and web's own gate turns into a failing one.
    text = config.read_text().replace(
        "  web: {depends_on: [types]}\n",
        "  web: {depends_on: [types]}\n  docs: {depends_on: [web]}\n  admin: {depends_on: [web]}\n",
    )
    text = text.replace("cross_project_dependencies:", ADDED_WHILE_WAITING.rstrip("\n") + "\n"
                        "cross_project_dependencies:")  # fmt: skip
    config.write_text(
        text.replace("apps/web, gates: {test: 'true'}", "apps/web, gates: {test: 'exit 1'}")
    )
    tasks.decide(1, p.root, approve=True)
    wf = p.resume()

    assert wf.status == "completed"
    every = "the task's final gate runs every project"
    gated = [
        [(row["project"], row["reason"], row["passed"]) for row in e.payload["projects"]]
        for e in p.events("projects_gated")
    ]
    assert gated == [[("types", every, True), ("web", "changed (apps/web/page.txt)", True)]]
