"""A task reviewed by a community role: the pack fetched from a git registry with the real `git`,
the review run by the real `claude` binary in the real sandbox against the scripted model API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import (
    GOOD_CALC,
    implementer,
    new_repo,
    planner,
    require_sandbox,
    reviewer,
    write_workflow,
)
from test_role_packs import publish, risk_release

from supervisor.context.packs.store import Request, install, user_scope
from supervisor.lifecycle import tasks

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def test_a_task_is_reviewed_by_an_installed_community_role(tmp_path: Path, serve: Any) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    base = {
        "pack.yaml": "name: base-reviewer\nversion: 1.0.0\nroles: [base_reviewer]\n",
        "roles/base_reviewer.yaml": "extends: reviewer\n",
    }
    publish(registry, "base-reviewer", {"1.0.0": base})
    publish(registry, "risk-reviewers", {v: risk_release(v) for v in ("1.0.0", "1.2.0")})
    install(user_scope(), Request(str(registry / "risk-reviewers.git"), "^1.0"))

    server = serve(planner(), implementer(GOOD_CALC), reviewer(when="weakens a stop-loss"))
    repo = new_repo(tmp_path, server.url)
    write_workflow(
        repo,
        "workflow:\n  initial_step: plan\n  steps:\n"
        "    plan: {role: planner, next: implement}\n"
        "    implement: {role: implementer, next: test}\n"
        "    test: {gate: test, next: review, on_fail: implement}\n"
        "    review: {role: risk_reviewer, next: commit, on_reject: implement}\n"
        "    commit: {action: commit}\n",
    )

    wf = tasks.start_task("Implement add and multiply", repo)

    assert wf.status == "completed"
    with tasks.reading(repo) as store:
        reviews = [s for s in store.steps(wf.id) if s["name"] == "review"]
        assert [s["status"] for s in reviews] == ["succeeded"]
    opening = [
        str(r.body.get("messages", [{}])[0].get("content"))
        for r in server.requests
        if "weakens a stop-loss" in str(r.body)
    ]
    assert opening, "the community role's own instructions reached the model"
