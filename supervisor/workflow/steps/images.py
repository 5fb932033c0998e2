"""The project image a step runs in: built first when the candidate's dependency files changed.

Why here and not in the sandbox layer: a rebuild may wait for a person (a dependency change is
approved before anything installs it with network access), which is workflow business.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.state.store import EventSpec

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.state.store import Workflow
    from supervisor.workflow.steps.base import StepContext
    from supervisor.workspace.treedata import CommitFiles


def image_for(c: StepContext, wf: Workflow, name: str, worktree: Path | CommitFiles) -> str | None:
    """The project image for this worktree's dependency files, built first if they changed
    (the build may use the network; the gate that follows never does)."""
    from supervisor.project import project_image

    wanted = project_image.image_for(c.repo, worktree, c.sandbox.base_image_id())
    if wanted is None:
        return None
    if not project_image.exists(c.sandbox.client, wanted.tag):
        from supervisor.policy import dependency_review
        from supervisor.project.toolchain_check import check_before_build, image_versions

        # A declared toolchain that cannot be had, or that the Dockerfile does not give, is
        # named before anyone is asked to approve a build that would fail on it.
        check_before_build(
            c.repo,
            project_image.trusted_dockerfile(c.repo) or b"",
            wanted.contents,
            lambda: image_versions(c.sandbox.image, c.sandbox.client),
        )
        dependency_review.await_approval(c, wf, name, worktree, wanted)
        files = ", ".join(wanted.files) or "no dependency files"
        why = (
            f"the dependency files ({files}) changed since the project image was built"
            if project_image.project_images(c.sandbox.client, c.repo)
            else f"no project image yet for {files}"
        )
        c.reporter.info(f"{why}: building {wanted.tag} before '{name}' runs")
        seconds = project_image.build(c.sandbox.client, c.repo, worktree, wanted)
        c.store.add_event(
            wf.id,
            EventSpec(
                "sandbox_rebuilt",
                step=name,
                status="built",
                payload={
                    "image": wanted.tag,
                    "reason": why,
                    "files": wanted.files,
                    "seconds": round(seconds, 1),
                },
            ),
        )
    return wanted.tag
