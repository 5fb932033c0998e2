"""A monorepo's project map is pinned when a task starts, as its gate commands are: which
projects a change reaches, what a component may touch and which gates run are decided by the
map the task started with. A project added, removed or rewired in the configuration mid-task (a
person's edit, a pull) or after a failure changes only later tasks."""

from __future__ import annotations

from typing import Any

from supervisor.config import Settings
from supervisor.guard import protected
from supervisor.workflow import project_gates, resuming

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
