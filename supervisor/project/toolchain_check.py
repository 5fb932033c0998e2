"""The project's declared toolchains against the image that will run its gates and workers.

Two questions, asked before any build (`supervisor sandbox build`, `init`'s gate check, a
task's rebuild) and by `doctor` and `supervisor sandbox status`:
1. Can every declared version be had? If not: ToolchainUnavailableError, naming it.
2. Does the project Dockerfile provide it? The Dockerfile is written once and is the user's to
   edit, so a later `engines.node: >=22.13` meets a Dockerfile that still installs nothing
   beyond the base's Node 20: ToolchainMismatchError names both, rather than a package
   manager's stack trace halfway through the build.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.core import trustmap
from supervisor.core.errors import SandboxError, SupervisorError, ToolchainMismatchError
from supervisor.project.dockerfile_sections import provided
from supervisor.project.toolchain_resolve import Resolved, satisfies
from supervisor.project.toolchain_sources import DEBIAN, resolve_files
from supervisor.project.toolchains import TOOL_NAMES, declares_any

if TYPE_CHECKING:
    import docker

    from supervisor.project.detect import Detection


def mismatches(dockerfile: str, wanted: list[Resolved], base: Mapping[str, str]) -> list[str]:
    """One finding per declared toolchain the Dockerfile does not provide (pure)."""
    installs = provided(dockerfile)
    builtin = {o.tool: o.versions[0] for o in DEBIAN} | dict(base)
    found = []
    for resolved in wanted:
        has = installs.get(resolved.tool) or builtin.get(resolved.tool)
        short = [d for d in resolved.declarations if has is None or not satisfies(has, d)]
        if short:
            asked = "; ".join(f"{d.spec} ({d.source})" for d in short)
            found.append(
                f"{TOOL_NAMES[resolved.tool]}: the project Dockerfile gives "
                f"{has or 'none'}, the project asks {asked} (resolves to {resolved.version}, "
                f"{resolved.provider})"
            )
    return found


def check_before_build(
    repo: Path,
    dockerfile: bytes,
    files: Mapping[str, bytes],
    base: Mapping[str, str] | Callable[[], Mapping[str, str]],
    *,
    registries: bool = True,
) -> list[Resolved]:
    """The resolved toolchains, or the error that stops the build before it starts. `base`:
    the image's own versions, asked only when the files declare something."""
    if not declares_any(files):
        return []
    own = base() if callable(base) else base
    wanted = resolve_files(files, own, registries=registries)
    require_provided(repo, dockerfile, wanted, own)
    return wanted


def require_provided(
    repo: Path, dockerfile: bytes, wanted: list[Resolved], base: Mapping[str, str]
) -> None:
    """ToolchainMismatchError when the Dockerfile does not give what the project declares."""
    found = mismatches(dockerfile.decode("utf-8", "replace"), wanted, base)
    if found:
        raise ToolchainMismatchError(
            "The project's toolchain is not the one its sandbox image would have: "
            + "; ".join(found)
            + ".",
            "Re-run `supervisor init` (it rewrites the Dockerfile it wrote, unless you edited "
            f"it), or remove {repo / trustmap.DOCKERFILE} and run `supervisor "
            "sandbox init`, or install that version in it yourself; then `supervisor sandbox "
            "build`. Nothing was built.",
        )


def with_toolchains(detection: Detection, files: Mapping[str, bytes], base_image: str) -> Detection:
    """`detection` with its toolchains resolved from the repository's dependency files (root
    and members), or with the reason they cannot be had (the build then stops on it)."""
    if not declares_any(files):
        return detection
    try:
        found = resolve_files(files, image_versions(base_image))
    except SupervisorError as e:
        return replace(detection, toolchains=[], toolchain_problem=e.message)
    return replace(detection, toolchains=found, toolchain_problem="")


def image_versions(image: str, client: docker.DockerClient | None = None) -> dict[str, str]:
    """The base image's own Node and Python; none when Docker or the image is not there."""
    from supervisor.project.toolchain_sources import base_versions

    try:
        if client is None:
            from supervisor.sandbox.docker import connect

            client = connect()
        return base_versions(client, image)
    except (SupervisorError, SandboxError, OSError):
        return {}
    except Exception as e:  # docker.errors.* (image missing): only the versions are unknown
        if type(e).__module__.startswith("docker"):
            return {}
        raise
