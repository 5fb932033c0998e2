"""Project sandbox images: the target project's toolchain and dependencies, installed at build time.

Gates run a project's tests with no network, so everything the tests import must already be in
the image. `.supervisor/sandbox/Dockerfile` (written by `supervisor init` or `supervisor sandbox
init`, the user's to edit) layers the project's dependencies on the base sandbox image; the build,
which may use the network, gets the project's dependency files (never its source: the worktree is
mounted at run time). The tag is a hash of the Dockerfile, the dependency files and the base
image, so an unchanged project reuses its image and a changed dependency file means one rebuild.
A workspace's members' manifests are dependency files too (a package manager installs the whole
workspace from them). The Dockerfile's text, stack by stack:
supervisor/project/dockerfile_sections.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.core import trustmap
from supervisor.core.errors import SandboxError
from supervisor.core.parsing import strip_ansi
from supervisor.guard.reading import read_regular
from supervisor.project.dockerfile_sections import HEADER as HEADER
from supervisor.project.dockerfile_sections import dockerfile_text as dockerfile_text
from supervisor.project.dockerfile_sections import node_section as node_section
from supervisor.workspace.treedata import CommitFiles, materialize

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import docker

    from supervisor.project.detect import Detection

DOCKERFILE = Path(trustmap.DOCKERFILE)
DEPENDENCY_FILES = re.compile(
    r"^(requirements[\w.\-]*\.txt|constraints[\w.\-]*\.txt|pyproject\.toml|setup\.py|setup\.cfg"
    r"|Pipfile(\.lock)?|poetry\.lock|pdm\.lock|uv\.lock|package\.json|package-lock\.json"
    r"|npm-shrinkwrap\.json|pnpm-lock\.yaml|pnpm-workspace\.yaml|yarn\.lock|\.yarnrc\.yml"
    r"|Cargo\.toml|Cargo\.lock|go\.mod|go\.sum|go\.work|go\.work\.sum"
    r"|\.nvmrc|\.node-version|\.python-version|rust-toolchain|rust-toolchain\.toml)$"
)
"""The toolchain files (.nvmrc, rust-toolchain.toml, ...) too: another declared version means
another toolchain in the image (supervisor/project/toolchains.py)."""
MEMBER_FILES = re.compile(
    r"^(package\.json|pyproject\.toml|Cargo\.toml|go\.mod|go\.sum|\.nvmrc|\.node-version"
    r"|\.python-version)$"
)
"""A workspace member's own manifests: what its package manager installs for it."""
MEMBER_DEPTH = 4
"""Directories deep a member may sit (`apps/web`, `services/api/v2`): deeper is a fixture."""
SKIPPED_DIRS = {"node_modules", "vendor", "target", "__pycache__"}
REQUIREMENTS = "supervisor-requirements.txt"
CONSTRAINTS = "supervisor-constraints.txt"
NOT_PACKAGES = {
    "tests",
    "test",
    "testing",
    "docs",
    "doc",
    "examples",
    "example",
    "scripts",
    "benchmarks",
    "build",
    "dist",
    "tools",
    "fixtures",
}
LABEL_PROJECT = "supervisor.project"
LABEL_HASH = "supervisor.project-hash"


def write_dockerfile(repo: Path, detection: Detection, base_image: str) -> tuple[Path, bool]:
    """Write the project Dockerfile unless one exists (the user's edits win); True if written."""
    path = repo / DOCKERFILE
    if path.exists():
        return path, False
    detection = resolved_detection(repo, detection, base_image)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dockerfile_text(detection, base_image))
    from supervisor.guard import trust

    trust.trust_file(repo, trustmap.DOCKERFILE)  # the user asked for it, and the text is ours
    return path, True


def resolved_detection(repo: Path, detection: Detection, base_image: str) -> Detection:
    """`detection` with the toolchains the checkout declares resolved (unless they are), which
    the Dockerfile then installs (supervisor/project/toolchain_check.py)."""
    from supervisor.project.toolchain_check import with_toolchains

    if detection.toolchains or detection.toolchain_problem:
        return detection
    try:
        files = dependency_files(repo)
    except SandboxError as e:
        return replace(detection, toolchain_problem=e.message)
    return with_toolchains(detection, files, base_image)


def trusted_dockerfile(repo: Path) -> bytes | None:
    """The project Dockerfile as the user trusted it (None without one). It is built with
    network on the host's engine and the workers run in its image: a repository's Dockerfile
    that the user has not trusted as it is now stops here, with its diff."""
    from supervisor.guard import trust

    path = trustmap.repo_path(repo, trustmap.DOCKERFILE, trustmap.NEEDS_TRUST)
    data = read_regular(repo, [trustmap.DOCKERFILE]).get(trustmap.DOCKERFILE)
    if data is None:
        if path.is_symlink():
            raise SandboxError(
                f"{path} is a symbolic link; the project Dockerfile must be a regular file.",
                "Replace the link with the file itself.",
            )
        return None
    what = "built with network, and the workers run in its image"
    trust.require_trusted_file(repo, trustmap.DOCKERFILE, data, what)
    return data


def dependency_files(tree: Path | CommitFiles) -> dict[str, bytes]:
    """The top-level dependency files of a commit (as blobs) or a directory, by path; in a
    workspace (pnpm-workspace.yaml, go.work, a package.json or Cargo.toml or pyproject.toml
    that declares one) its members' manifests too: a package manager installs a workspace from
    every member's manifest, and the image links the members' packages (node_section).

    A dependency file that is a symlink is refused: it could name any file on the host."""
    if isinstance(tree, Path):
        names = sorted(p.name for p in tree.iterdir() if DEPENDENCY_FILES.match(p.name))
        if _declares_workspace(read_regular(tree, names)):
            names += [p.relative_to(tree).as_posix() for p in _member_manifests(tree)]
        links = {n: str((tree / n).readlink()) for n in names if (tree / n).is_symlink()}
        found = read_regular(tree, names)
    else:
        every = [*tree.files(), *tree.symlinks()]
        names = [p for p in every if DEPENDENCY_FILES.match(p)]
        if _declares_workspace(tree.read_many(sorted(set(names) - set(tree.symlinks())))):
            names += [p for p in every if _member_file(p)]
        links = {n: tree.link_target(n) for n in names if n in tree.symlinks()}
        found = tree.read_many(sorted(set(names) - set(links)))
    if links:
        named = ", ".join(f"{name} (-> {target})" for name, target in sorted(links.items()))
        raise SandboxError(
            f"Dependency files that are symlinks are refused: {named}.",
            "Commit the dependency file itself, not a link to it.",
        )
    return dict(sorted(found.items()))


def _member_file(path: str) -> bool:
    parts = path.split("/")
    return (
        1 < len(parts) <= MEMBER_DEPTH + 1
        and MEMBER_FILES.match(parts[-1]) is not None
        and not any(p.startswith(".") or p in SKIPPED_DIRS for p in parts[:-1])
    )


def _member_manifests(tree: Path) -> list[Path]:
    """The members' manifests below `tree`, not through a linked directory."""
    found = []
    for parent, dirs, files in os.walk(tree):
        rel = Path(parent).relative_to(tree).as_posix()
        below = "" if rel == "." else f"{rel}/"
        dirs[:] = sorted(d for d in dirs if _member_file(f"{below}{d}/package.json"))
        if rel != ".":
            found += [Path(parent) / f for f in sorted(files) if _member_file(below + f)]
    return found


def _declares_workspace(top: dict[str, bytes]) -> bool:
    """Whether the top-level dependency files make the repository a workspace of members
    (parsed as data, as `supervisor init` reads them; one that does not parse declares none)."""
    if "pnpm-workspace.yaml" in top or "go.work" in top:
        return True
    package = _parsed(top, "package.json", json.loads)
    cargo = _parsed(top, "Cargo.toml", tomllib.loads)
    uv = _parsed(_parsed(_parsed(top, "pyproject.toml", tomllib.loads), "tool"), "uv")
    return bool(package.get("workspaces") or cargo.get("workspace") or uv.get("workspace"))


def _parsed(data: Any, key: str, parse: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """`data[key]` (parsed from bytes by `parse`) when it is a table; else an empty one."""
    value = data.get(key) if isinstance(data, dict) else None
    if parse is not None and isinstance(value, bytes):
        try:
            value = parse(value.decode("utf-8", "replace"))
        except ValueError:  # JSONDecodeError and TOMLDecodeError both are
            value = None
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class ProjectImage:
    tag: str
    content_hash: str
    files: list[str]
    python_requirements: str = ""
    python_constraints: str = ""
    packages: tuple[str, ...] = ()
    """The project's top-level Python packages, imported by the build's smoke test."""
    contents: dict[str, bytes] = field(default_factory=dict, compare=False, repr=False)


def image_for(repo: Path, tree: Path | CommitFiles, base_id: str) -> ProjectImage | None:
    """The image tag for the dependency files in `tree` (a commit's blobs, or a directory);
    None without a Dockerfile."""
    from supervisor.project import python_deps

    dockerfile = repo / DOCKERFILE
    if not dockerfile.is_file():
        return None
    digest = hashlib.sha256(dockerfile.read_bytes() + base_id.encode())
    files = dependency_files(tree)
    for name, data in files.items():
        digest.update(name.encode() + b"\0" + data)
    with _declaring_files(tree) as folder:
        declared = python_deps.read(folder)
        packages = top_level_packages(folder)
    requirements, constraints = declared.requirements_text(), declared.constraints_text()
    digest.update(b"\0" + requirements.encode() + b"\0" + constraints.encode())
    content = digest.hexdigest()[:16]
    project = hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:12]
    return ProjectImage(
        f"supervisor-project-{project}:{content}",
        content,
        list(files),
        requirements,
        constraints,
        packages,
        files,
    )


@contextlib.contextmanager
def _declaring_files(tree: Path | CommitFiles) -> Iterator[Path]:
    """A directory holding what declares the Python dependencies and packages: `tree` itself, or
    for a commit, its top-level files, `requirements/` and the packages' `__init__.py` written as
    regular files from the blobs (never a symlink: python_deps then reads plain host files)."""
    if isinstance(tree, Path):
        yield tree
        return
    wanted = {
        p
        for p in tree.files()
        if "/" not in p
        or p.startswith("requirements/")
        or (p.endswith("/__init__.py") and p.count("/") <= 2)
    }
    with tempfile.TemporaryDirectory(prefix="supervisor-deps-") as tmp:
        materialize(tree.git_dir, tree.commit, Path(tmp), symlinks=False, paths=wanted)
        yield Path(tmp)


def top_level_packages(tree: Path) -> tuple[str, ...]:
    """Folders with an `__init__.py` at the root or under src/ (tests, docs and the like left
    out): what `import <project>` means for the smoke test."""
    found = []
    for parent in (tree, tree / "src"):
        if not parent.is_dir() or parent.is_symlink():
            continue
        for entry in sorted(parent.iterdir()):
            if (
                entry.is_dir()
                and not entry.is_symlink()
                and entry.name.isidentifier()
                and entry.name not in NOT_PACKAGES
                and (entry / "__init__.py").is_file()
            ):
                found.append(entry.name)
    return tuple(found)


def exists(client: docker.DockerClient, tag: str) -> bool:
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def build(
    client: docker.DockerClient,
    repo: Path,
    tree: Path | CommitFiles,
    image: ProjectImage,
    *,
    no_cache: bool = False,
    on_output: Callable[[str], None] | None = None,
) -> float:
    """Build the project image (network allowed: this is the only step that installs); seconds."""
    import docker.errors

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="supervisor-build-") as tmp:
        context = Path(tmp)
        dockerfile = trusted_dockerfile(repo)
        if dockerfile is None:
            raise SandboxError(f"There is no {DOCKERFILE} in {repo}.", "Run `supervisor init`.")
        (context / "Dockerfile").write_bytes(dockerfile)
        (context / "deps").mkdir()
        (context / "extra-ca").mkdir()
        contents = image.contents or dependency_files(tree)
        for name in image.files:  # a workspace member's manifest in its own directory
            (context / "deps" / name).parent.mkdir(parents=True, exist_ok=True)
            (context / "deps" / name).write_bytes(contents[name])
        (context / "deps" / REQUIREMENTS).write_text(image.python_requirements)
        (context / "deps" / CONSTRAINTS).write_text(image.python_constraints)
        bundle = os.environ.get("SUPERVISOR_EXTRA_CA_BUNDLE") or os.environ.get("SSL_CERT_FILE")
        if bundle and Path(bundle).is_file():
            shutil.copy(bundle, context / "extra-ca" / "extra.crt")
        log: list[str] = []
        try:
            for chunk in client.api.build(
                path=str(context),
                tag=image.tag,
                rm=True,
                forcerm=True,
                nocache=no_cache,
                decode=True,
                network_mode="bridge",
                labels={
                    LABEL_PROJECT: str(repo.resolve()),
                    LABEL_HASH: image.content_hash,
                    "supervisor.dependency-files": ",".join(image.files),
                },
            ):
                text = strip_ansi(chunk.get("stream") or "")
                if text:
                    log.append(text)
                    if on_output is not None:
                        on_output(text)
                if "error" in chunk:
                    raise _build_error(repo, chunk["error"], log, shown=on_output is not None)
        except docker.errors.APIError as e:
            message = str(e.explanation or e)
            raise _build_error(repo, message, log, shown=on_output is not None) from e
    return time.monotonic() - started


SMOKE = """
import importlib, json, sys
result = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
        result[name] = None
    except ModuleNotFoundError as e:
        result[name] = ["missing", e.name or "", str(e)]
    except BaseException as e:
        result[name] = ["error", type(e).__name__, str(e)[:300]]
print("SUPERVISOR-SMOKE " + json.dumps(result))
"""


def smoke_test(
    client: docker.DockerClient, repo: Path, tree: Path, image: ProjectImage
) -> list[str]:
    """Import the project's top-level packages in the new image with the network off; raise
    (and drop the image, so it is not reused) when a module the project needs is missing.
    Returns notes on imports that failed for other reasons (the tests' business, not the
    image's)."""
    if not image.packages:
        return []
    from supervisor.sandbox.docker import WORKSPACE, remove_container
    from supervisor.sandbox.run_files import container_user

    container = client.containers.create(
        image.tag,
        command=["python3", "-c", SMOKE, *image.packages],
        working_dir=WORKSPACE,
        user=container_user(),
        environment={"HOME": "/tmp/home", "PYTHONDONTWRITEBYTECODE": "1"},
        volumes={str(tree): {"bind": WORKSPACE, "mode": "ro"}},
        network_mode="none",
        read_only=True,
        tmpfs={"/tmp": "rw,exec,nosuid,size=256m"},
        mem_limit="1g",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        labels={LABEL_PROJECT: str(repo.resolve()), "supervisor.smoke": "1"},
    )
    try:
        container.start()
        container.wait(timeout=300)
        output = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
    finally:
        remove_container(container)
    line = next((x for x in output.splitlines() if x.startswith("SUPERVISOR-SMOKE ")), None)
    if line is None:
        _drop(client, image.tag)
        raise SandboxError(
            f"The project image's smoke test (import {', '.join(image.packages)}) did not run: "
            f"{output.strip()[-800:]}",
            f"Check {repo / DOCKERFILE} (python3 must be on PATH), then run "
            "`supervisor sandbox build`.",
        )
    notes = []
    for package, outcome in json.loads(line.split(" ", 1)[1]).items():
        if outcome is None:
            continue
        kind, name, message = outcome
        if kind == "missing" and name.split(".")[0] not in image.packages:
            _drop(client, image.tag)
            raise SandboxError(
                f"The project image lacks the module '{name}': `import {package}` fails with the "
                f"network off ({message}).",
                f"Declare the distribution that provides '{name}' among the project's "
                "dependencies (pyproject.toml project.dependencies, setup.py install_requires, "
                f"setup.cfg or a requirements file), or install it in {repo / DOCKERFILE}; then "
                "run `supervisor sandbox build`.",
            )
        notes.append(f"import {package}: {name}: {message}")
    return notes


def _drop(client: docker.DockerClient, tag: str) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.APIError):
        client.images.remove(tag, noprune=False)


def project_images(client: docker.DockerClient, repo: Path) -> list[Any]:
    return client.images.list(filters={"label": f"{LABEL_PROJECT}={repo.resolve()}"})


_DOCKER_OWN = ("Step ", "---> ", "Removing intermediate container ")
"""The legacy builder's own lines, around (and after) the failed step's output."""
_TELLING = re.compile(r"\[ERR_|\bERR!|^\s*(npm )?error\b|^ERROR\b|^E: ", re.IGNORECASE)
"""A tool's error line (pnpm's `[ERR_PNPM_FETCH_404] …`, npm's, pip's, apt's), which the hints
and notes the tool prints after it would otherwise bury."""


def _build_error(repo: Path, message: str, log: list[str], *, shown: bool) -> SandboxError:
    """The failure's telling line first (the build log's last error line, such as pnpm's
    `[ERR_PNPM_FETCH_404] GET …`, or its last line, such as `mv: cannot stat 'node_modules'`,
    rather than Docker's `The command '/bin/sh -c …' returned a non-zero code`), then the log's
    tail, unless the log was already streamed to the user: it is shown once."""
    lines = [line.rstrip() for line in strip_ansi("".join(log)).splitlines() if line.strip()]
    steps = [i for i, line in enumerate(lines) if line.startswith("Step ")]
    own = [line.lstrip().startswith(_DOCKER_OWN) for line in lines]
    step = [x for i, x in enumerate(lines) if i >= (steps or [0])[-1] and not own[i]]
    lines = [line for i, line in enumerate(lines) if not own[i]]
    told = [line for line in step if _TELLING.search(line)] or lines  # the failed step's error
    cause = told[-1].strip() if told else strip_ansi(message).strip().splitlines()[0]
    body = f"Building the project sandbox image failed: {cause}"
    if not shown:
        body += f"\n  ({strip_ansi(message).strip()})\n" + "\n".join(
            f"  | {line}" for line in lines[-15:]
        )
    where = "the build output above" if shown else "the build output"
    return SandboxError(
        body,
        f"Fix the dependency or {repo / DOCKERFILE} (see {where}), then run "
        "`supervisor sandbox build`; nothing else was changed.",
    )
