"""`supervisor sandbox init|build|status|shell`: the project image commands.

They work on a throwaway worktree of HEAD (what a new task would start from) and leave to
supervisor/project/project_image.py what the image is made of and how it is built.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, cast

from supervisor.core import owners
from supervisor.core.errors import SandboxError
from supervisor.lifecycle.opening import Project, open_project
from supervisor.project import project_image
from supervisor.project.toolchain_check import check_before_build, image_versions
from supervisor.sandbox.docker import DockerSandbox
from supervisor.state.locks import critical_section

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


def sandbox_init(path: Path) -> tuple[Path, bool]:
    from supervisor.project.detect import detect

    project = open_project(path)
    return project_image.write_dockerfile(
        project.root, detect(project.root), project.settings.sandbox.image
    )


@contextlib.contextmanager
def head_tree(project: Project) -> Iterator[Path]:
    """A throwaway worktree of HEAD: what a new task would start from."""
    # Named for its process (pid and start time): remove_dead_head_trees knows a killed one's.
    owner = owners.this_process()
    tree = project.workspace.add_worktree(f"sandbox-{owner}", project.workspace.head_commit())
    try:
        yield tree
    finally:
        project.workspace.remove_worktree(tree)


def remove_dead_head_trees(project: Project) -> list[str]:
    """The HEAD worktrees of image commands whose process is gone (killed mid-build)."""
    removed = []
    found = project.workspace.worktrees_dir
    for tree in sorted(found.glob("sandbox-*")) if found.is_dir() else []:
        owner = tree.name.removeprefix("sandbox-")
        if owners.is_owner(owner) and not owners.alive(owner):
            project.workspace.remove_worktree(tree)
            removed.append(tree.name)
    return removed


def sandbox_build(
    path: Path, *, no_cache: bool = False, on_output: Any = None
) -> tuple[str, float | None]:
    """Build the project image for HEAD's dependency files; (tag, seconds or None if reused).
    Tasks starting at the same time build it once: the second waits, then reuses it."""
    from supervisor.sandbox.docker import connect

    project = open_project(path)
    project_image.trusted_dockerfile(project.root)  # an untrusted one is never built
    client = connect()
    sandbox = DockerSandbox(
        project.settings.sandbox.image, project.settings.sandbox.egress_network, client
    )
    sandbox.check_image()
    base = client.images.get(project.settings.sandbox.image)
    with head_tree(project) as tree, critical_section(project.state_dir, "image"):
        image = project_image.image_for(project.root, tree, cast(str, base.id))
        if image is None:
            raise SandboxError(
                f"There is no {project_image.DOCKERFILE} in this repository.",
                "Run `supervisor sandbox init` (or `supervisor init`) to write one.",
            )
        if project_image.exists(client, image.tag) and not no_cache:
            return image.tag, None
        # The declared toolchains (Node, Python, Go, Rust) can be had and the Dockerfile gives
        # them: said here, naming the file that asks, before a build fails on it.
        check_before_build(
            project.root,
            project_image.trusted_dockerfile(project.root) or b"",
            image.contents,
            lambda: image_versions(project.settings.sandbox.image, client),
        )
        seconds = project_image.build(
            client, project.root, tree, image, no_cache=no_cache, on_output=on_output
        )
        # The smoke test: the project's packages import offline, or the build fails naming
        # the missing module (and the image is dropped, so the next build tries again).
        for note in project_image.smoke_test(client, project.root, tree, image):
            if on_output is not None:
                on_output(f"smoke test: {note}\n")
        return image.tag, seconds


def sandbox_status(path: Path) -> dict[str, Any]:
    from supervisor.sandbox.docker import connect

    project = open_project(path)
    client = connect()
    base = client.images.get(project.settings.sandbox.image)
    with head_tree(project) as tree:
        wanted = project_image.image_for(project.root, tree, cast(str, base.id))
    toolchains = _toolchains(project, wanted, client)
    images = []
    for found in project_image.project_images(client, project.root):
        labels = found.labels or {}
        images.append(
            {
                "tags": found.tags,
                "created": found.attrs.get("Created", "")[:19],
                "size_mb": round(found.attrs.get("Size", 0) / 1e6),
                "files": labels.get("supervisor.dependency-files", ""),
                "current": wanted is not None and wanted.tag in found.tags,
            }
        )
    return {
        "base_image": f"{project.settings.sandbox.image} ({base.short_id})",
        "dockerfile": str(project.root / project_image.DOCKERFILE) if wanted is not None else None,
        "wanted": wanted.tag if wanted else None,
        "dependency_files": wanted.files if wanted else [],
        "images": images,
        **toolchains,
    }


def _toolchains(
    project: Project, wanted: project_image.ProjectImage | None, client: Any
) -> dict[str, Any]:
    """What the project declares, what each resolves to and from where, and the findings: a
    version that cannot be had, or that the Dockerfile does not give."""
    from supervisor.core.errors import SupervisorError
    from supervisor.project.toolchain_check import mismatches
    from supervisor.project.toolchain_sources import resolve_files
    from supervisor.project.toolchains import declares_any

    if wanted is None or not declares_any(wanted.contents):
        return {"toolchains": [], "toolchain_findings": []}
    base = image_versions(project.settings.sandbox.image, client)
    try:
        resolved = resolve_files(wanted.contents, base)
    except SupervisorError as e:
        return {"toolchains": [], "toolchain_findings": [f"{e.message} {e.hint}"]}
    dockerfile = (project.root / project_image.DOCKERFILE).read_text(errors="replace")
    return {
        "toolchains": [r.label() for r in resolved],
        "toolchain_findings": mismatches(dockerfile, resolved, base),
    }


def sandbox_shell(path: Path, command: list[str] | None) -> int:
    """An interactive shell (or `command`) in the gate sandbox, on a writable throwaway copy of
    HEAD, as a gate gets one: uncommitted files are not there, and what the command writes
    (coverage, caches) is discarded with the copy. The command's exit code."""
    import subprocess

    from supervisor.sandbox.run_files import own_for_container

    project = open_project(path)
    tag, _ = (
        sandbox_build(path)
        if (project.root / project_image.DOCKERFILE).is_file()
        else (project.settings.sandbox.image, None)
    )
    with head_tree(project) as tree:
        own_for_container(tree)
        try:
            return subprocess.run(shell_argv(tree, tag, command), check=False).returncode
        except KeyboardInterrupt:
            return 130


def shell_argv(tree: Path, tag: str, command: list[str] | None) -> list[str]:
    """`docker run` for the gate sandbox on `tree`: no network, the tree writable, the root file
    system the container's own layer (discarded with it), the worktree's `.git` file read-only."""
    from supervisor.core import process
    from supervisor.gates.run import CACHE_HOMES
    from supervisor.sandbox.run_files import container_user, git_file_read_only

    env = {"HOME": "/tmp/home", **CACHE_HOMES}
    mounts = [f"{tree}:/workspace:rw"] + [
        f"{host}:{bind['bind']}:ro" for host, bind in git_file_read_only(tree).items()
    ]
    return [
        process.find_program("docker"),
        "run",
        "--rm",
        "-i",
        *(["-t"] if not command else []),
        "--network",
        "none",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--tmpfs",
        "/tmp:rw,exec",
        "--user",
        container_user(),
        *(arg for key, value in env.items() for arg in ("-e", f"{key}={value}")),
        *(arg for mount in mounts for arg in ("-v", mount)),
        "-w",
        "/workspace",
        tag,
        *(command or ["bash"]),
    ]
