"""Shared pieces of the monorepo end-to-end specs (uv, pnpm and Go workspaces): plans naming
projects, what the task's events say was gated, and a workspace fixture copied into a
repository whose project image is built once per spec file."""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import pointed_at, remove_project_images

from supervisor.guard.trust import trust
from supervisor.lifecycle import image_commands, tasks
from supervisor.lifecycle.demo import fenced
from supervisor.project.detect import detect
from supervisor.project.project_image import write_dockerfile

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

IMAGE = "supervisor-sandbox:latest"
WORKFLOW = """workflow:
  initial_step: plan
  steps:
    plan: {role: planner, next: implement}
    implement: {role: implementer, for_each: component, gates: [test], next: commit,
                max_retries: 1}
    commit: {action: commit}
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def plan(*components: dict[str, Any]) -> str:
    return "Plan:\n" + fenced(
        {
            "status": "COMPLETE",
            "phases": [{"id": "p1", "description": "work", "components": list(components)}],
            "estimated_components": len(components),
        }
    )


def component(cid: str, project: str, files: list[str]) -> dict[str, Any]:
    return {"id": cid, "description": cid, "files": files, "depends_on": [], "project": project}


def sent(server: Any) -> list[str]:
    """The text of each request, as the model read it."""
    return [_texts(r.body) for r in server.requests]


def _texts(node: Any) -> str:
    if isinstance(node, dict):
        return "\n".join(_texts(v) for v in node.values())
    if isinstance(node, list):
        return "\n".join(_texts(v) for v in node)
    return node if isinstance(node, str) else ""


def gated(repo: Path, wf_id: int) -> list[list[tuple[str, str, bool | None]]]:
    """Each `projects_gated` event: the projects gated, why, and whether each passed."""
    with tasks.reading(repo) as store:
        return [
            [(p["project"], p["reason"], p["passed"]) for p in e.payload["projects"]]
            for e in store.events(wf_id)
            if e.type == "projects_gated"
        ]


def gate_steps(repo: Path, wf_id: int) -> list[tuple[str, str | None]]:
    with tasks.reading(repo) as store:
        return [(e.step, e.status) for e in store.events(wf_id) if e.type == "gate"]


def contents_on_branch(repo: Path, base: str, branch: str, path: str) -> list[str]:
    """`path` in every commit from `base` (excluded) to `branch`: what ever landed there."""
    commits = git(repo, "rev-list", f"{base}..{branch}").split()
    return [git(repo, "show", f"{c}:{path}") for c in commits]


def built_workspace(root: Path, fixture: Path, config: str) -> Iterator[tuple[Path, Path, str]]:
    """The fixture as a committed repository with the projects' `config`, a project Dockerfile
    as `supervisor sandbox init` writes it for the detected stack, and its image built once
    (with network); yields (repo, pristine copy, image). Each spec restores the repository at
    the same path, so the image (named after the checkout's path and its dependency files) is
    reused. The images are removed afterwards."""
    repo = root / "repo"
    shutil.copytree(fixture, repo)
    (repo / ".supervisor").mkdir()
    (repo / ".supervisor" / "config.yaml").write_text(config)
    (repo / ".supervisor" / "workflow.yaml").write_text(WORKFLOW)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SUPERVISOR_USER_DIR", str(root / "user"))
        write_dockerfile(repo, detect(repo), IMAGE)  # trusted: written by the supervisor
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "a workspace: shared types and their consumers")
        image, _ = image_commands.sandbox_build(repo)
    pristine = root / "pristine"
    shutil.copytree(repo, pristine, symlinks=True, ignore=shutil.ignore_patterns("trash"))
    try:
        yield repo, pristine, image
    finally:
        remove_project_images(root)


def fresh(repo: Path, pristine: Path, base_url: str) -> Path:
    """The pristine repository back at `repo`, its roles run by the pipeline specs' CLI
    (e2e_support.CLI) against the scripted API."""
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(pristine, repo, symlinks=True)
    config = repo / ".supervisor" / "config.yaml"
    config.write_text(pointed_at(config.read_text(), base_url))
    trust(repo)
    return repo
