"""Recursive decomposition through the real engine, real git and real SQLite, with the stand-in
sandbox (scripted workers): a component split into a sub-plan, each expansion one transition,
the sub-components merged into their parent's branch and judged by its gates (the QA pass) before
the parent merges upward. The end-to-end specs (test_decompose_e2e.py) run the same on the real
CLI in the real sandbox."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from test_engine_fast import Project, plans, project, reviews, warm_packer, writes

from supervisor.context.tokens import count
from supervisor.core.errors import ApprovalRequired
from supervisor.guard.trust import trust
from supervisor.sandbox.standin import answer

if TYPE_CHECKING:
    from collections.abc import Callable

    from supervisor.sandbox.standin import WorkerCall

__all__ = ["project", "warm_packer"]

WORKFLOW = """plan
  steps:
    plan: {role: planner, next: implement}
    implement: {role: implementer, for_each: component, gates: [test], next: review,
                max_retries: 1}
    review: {role: reviewer, next: commit, on_reject: implement}
    commit: {action: commit}
"""
GATE = {"test": "test ! -f a.txt || grep -q a a.txt"}


def component(cid: str, *files: str, depends_on: list[str] | None = None) -> dict[str, Any]:
    return {
        "id": cid,
        "description": f"the {cid} part",
        "files": list(files),
        "depends_on": depends_on or [],
    }


def too_large(reason: str) -> Callable[[WorkerCall], str]:
    return lambda call: answer({"status": "TOO_LARGE", "summary": "too big", "reason": reason})


def subplan(*components: dict[str, Any]) -> Callable[[WorkerCall], str]:
    return plans(*components)


def shape(p: Project) -> list[tuple[str, str]]:
    return [(e.type, e.payload.get("component", "")) for e in p.events() if "expan" in e.type]


def test_a_component_reported_too_large_is_split_and_its_parts_merge_into_it_before_it_merges(
    project: Callable[..., Project],
) -> None:
    p = project(
        WORKFLOW,
        GATE,
        (
            "SUB-PLAN OF COMPONENT 'big'",
            subplan(component("x", "b1.txt"), component("y", "b2.txt")),
        ),
        ("ROLE: planner", plans(component("a", "a.txt"), component("big", "b1.txt", "b2.txt"))),
        ("'a'", writes({"a.txt": "a\n"})),
        ("'big'", too_large("two modules, each a day's work")),
        ("'big.1'", writes({"b1.txt": "one\n"})),
        ("'big.2'", writes({"b2.txt": "two\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    wf = p.start()

    assert wf.status == "completed"
    assert {p.on_branch(f) for f in ("a.txt", "b1.txt", "b2.txt")} == {"a\n", "one\n", "two\n"}
    assert shape(p) == [("component_expanding", "big"), ("component_expanded", "big")]
    (expanded,) = p.events("component_expanded")
    assert expanded.payload["children"] == ["big.1", "big.2"]
    assert expanded.payload["trigger"] == "too_large"
    merged = [
        (e.payload["component"], e.payload.get("parent")) for e in p.events("component_merged")
    ]
    # The parts merge into big's branch, then big (after its QA gate) into the integration.
    assert {m for m in merged[:-1] if m[1]} == {("big.1", "big"), ("big.2", "big")}
    assert merged[-1] == ("big", None)
    gates = [e.step for e in p.events("gate")]
    assert "implement/big/test" in gates  # the QA pass on the merged parts
    # The sub-planner saw the reason and the component's files.
    sub = next(c.prompt for _, c in p.script.calls if "SUB-PLAN" in c.prompt)
    assert "two modules, each a day's work" in sub and "b1.txt, b2.txt" in sub
    tree = p.workflow().context["decomposition"]["nodes"]["big"]
    assert tree["status"] == "expanded" and tree["depth"] == 1


def test_a_component_that_fails_its_gates_after_its_retries_is_split_and_then_passes(
    project: Callable[..., Project],
) -> None:
    p = project(
        WORKFLOW,
        {"test": "! grep -q wrong a.txt"},
        ("SUB-PLAN OF COMPONENT 'a'", subplan(component("a1", "a.txt"), component("a2", "b.txt"))),
        ("ROLE: planner", plans(component("a", "a.txt", "b.txt"))),
        ("'a'", writes({"a.txt": "wrong 1\n"})),
        ("'a'", writes({"a.txt": "wrong 2\n"})),
        ("'a.1'", writes({"a.txt": "right\n"})),
        ("'a.2'", writes({"b.txt": "b\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    wf = p.start()

    assert wf.status == "completed"
    assert p.on_branch("a.txt") == "right\n"
    (expanding,) = p.events("component_expanding")
    assert expanding.payload["trigger"] == "failed"
    assert "wrong" in expanding.payload["reason"] or "test" in expanding.payload["reason"]


def test_past_the_depth_bound_the_task_waits_for_a_person_with_the_reasons(
    project: Callable[..., Project],
) -> None:
    p = project(
        WORKFLOW,
        GATE,
        (
            "SUB-PLAN OF COMPONENT 'big'",
            subplan(component("x", "b1.txt"), component("y", "b2.txt")),
        ),
        ("ROLE: planner", plans(component("big", "b1.txt", "b2.txt"))),
        ("'big'", too_large("too much")),
        ("'big.1'", too_large("still too much")),
        ("'big.2'", writes({"b2.txt": "two\n"})),
    )
    with (p.root / ".supervisor" / "config.yaml").open("a") as config:
        config.write("limits:\n  decomposition:\n    max_depth: 1\n")
    with pytest.raises(ApprovalRequired) as stopped:
        p.start()
    # What the exit-10 message and the notification say.
    assert "component big.1 (depth 2) needs you" in stopped.value.message
    assert "still too much" in stopped.value.message

    wf = p.workflow()
    assert wf.status == "awaiting_approval"
    (blocked,) = p.events("decomposition_blocked")
    assert blocked.payload["component"] == "big.1"
    assert "max_depth 1" in blocked.payload["why"]
    assert "still too much" in blocked.payload["reason"]
    node = wf.context["decomposition"]["nodes"]["big.1"]
    assert node["status"] == "blocked" and node["depth"] == 2


def test_attack_a_sub_plan_that_reaches_outside_its_component_is_sent_back_with_the_reason(
    project: Callable[..., Project],
) -> None:
    """The sub-planner (an untrusted worker) hands a sub-component the project's own
    configuration and a dependency on another level; both are refused, it is told why, and only
    its corrected sub-plan runs."""
    p = project(
        WORKFLOW,
        GATE,
        (
            "SUB-PLAN OF COMPONENT 'big'",
            subplan(component("x", "b1.txt"), component("y", ".supervisor/config.yaml")),
        ),
        (
            "SUB-PLAN OF COMPONENT 'big'",
            subplan(component("x", "b1.txt", depends_on=["a"]), component("y", "b2.txt")),
        ),
        (
            "SUB-PLAN OF COMPONENT 'big'",
            subplan(component("x", "b1.txt"), component("y", "b2.txt")),
        ),
        ("ROLE: planner", plans(component("a", "a.txt"), component("big", "b1.txt", "b2.txt"))),
        ("'a'", writes({"a.txt": "a\n"})),
        ("'big'", too_large("two jobs")),
        ("'big.1'", writes({"b1.txt": "one\n"})),
        ("'big.2'", writes({"b2.txt": "two\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    with (p.root / ".supervisor" / "config.yaml").open("a") as config:
        config.write("limits:\n  decomposition:\n    max_plan_attempts: 3\n")
    wf = p.start()

    assert wf.status == "completed"
    refused = [e.payload["problem"] for e in p.events("subplan_rejected")]
    assert ".supervisor/config.yaml" in refused[0] and "outside the scope" in refused[0]
    assert "siblings only" in refused[1]
    asked = [c.prompt for _, c in p.script.calls if "SUB-PLAN" in c.prompt]
    assert ".supervisor/config.yaml" in asked[1]  # the planner is told why
    assert p.git("diff", "--stat", wf.base_sha, wf.task_branch, "--", ".supervisor") == ""


def test_a_component_whose_pack_would_pass_its_roles_token_budget_is_split_before_it_runs(
    project: Callable[..., Project],
) -> None:
    """Its worker would see a pruned pack, without all of its own files: split it first. Each
    part's files fit the implementer's budget; the whole component's do not."""
    p = project(
        WORKFLOW,
        GATE,
        (
            "SUB-PLAN OF COMPONENT 'big'",
            subplan(component("x", "b1.txt"), component("y", "b2.txt")),
        ),
        ("ROLE: planner", plans(component("big", "b1.txt", "b2.txt"))),
        ("'big.1'", writes({"b1.txt": "one\n"})),
        ("'big.2'", writes({"b2.txt": "two\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    text = "".join(f"line {i} of the old module, kept as it is\n" for i in range(300))
    for name in ("b1.txt", "b2.txt"):
        (p.root / name).write_text(text)
    p.git("add", "b1.txt", "b2.txt")
    p.git("commit", "-q", "-m", "two old modules")
    budget = count(text) + 2_000  # one file and its prompt fit; both files do not
    roles = p.root / ".supervisor" / "roles"
    roles.mkdir()
    (roles / "implementer.yaml").write_text(
        f"extends: implementer\ncontext:\n  token_budget: {budget}\n"
    )
    trust(p.root)
    wf = p.start()

    assert wf.status == "completed"
    (asked,) = p.events("component_split_requested")
    assert asked.status == "scope" and asked.payload["component"] == "big"
    assert f"implementer role's token budget ({budget}" in asked.payload["reason"]
    implementers = [c.prompt for _, c in p.script.calls if c.role == "implementer"]
    assert implementers and not any("'big' (phase" in prompt for prompt in implementers)
    assert {p.on_branch("b1.txt"), p.on_branch("b2.txt")} == {"one\n", "two\n"}
