"""Project sandbox images: the target project's toolchain and dependencies, installed at build time.

Gates run a project's tests with no network, so everything the tests import must already be in
the image. `.supervisor/sandbox/Dockerfile` (written by `supervisor init` or `supervisor sandbox
init`, the user's to edit) layers the project's dependencies on the base sandbox image; the build,
which may use the network, gets the project's dependency files (never its source: the worktree is
mounted at run time). The tag is a hash of the Dockerfile, the dependency files and the base
image, so an unchanged project reuses its image and a changed dependency file means one rebuild.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.errors import SandboxError
from supervisor.packer import read_regular
from supervisor.treedata import CommitFiles

if TYPE_CHECKING:
    from collections.abc import Callable

    import docker

    from supervisor.detect import Detection

DOCKERFILE = Path(".supervisor") / "sandbox" / "Dockerfile"
DEPENDENCY_FILES = re.compile(
    r"^(requirements[\w.\-]*\.txt|constraints[\w.\-]*\.txt|pyproject\.toml|setup\.py|setup\.cfg"
    r"|Pipfile(\.lock)?|poetry\.lock|package\.json|package-lock\.json|npm-shrinkwrap\.json"
    r"|Cargo\.toml|Cargo\.lock|go\.mod|go\.sum)$"
)
LABEL_PROJECT = "supervisor.project"
LABEL_HASH = "supervisor.project-hash"
HEADER = (
    "# Written by `supervisor sandbox init`. It is yours to edit: supervisor never overwrites\n"
)

PYTHON = r"""
# Python: a virtualenv with the project's dependencies (not the project itself: the worktree is
# mounted at /workspace when gates run, and PYTHONPATH points there).
RUN apt-get update && apt-get install -y --no-install-recommends python3-pip python3-venv \
 && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH VIRTUAL_ENV=/opt/venv PYTHONPATH=/workspace:/workspace/src
RUN cd /deps && set -e; \
    for f in requirements*.txt; do [ -f "$f" ] && pip install --no-cache-dir -r "$f"; done; \
    if [ -f pyproject.toml ]; then python3 -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb')).get('project', {}); print('\n'.join(p.get('dependencies', []) + [r for g in p.get('optional-dependencies', {}).values() for r in g]))" > /tmp/project-requirements.txt && pip install --no-cache-dir -r /tmp/project-requirements.txt; fi; \
    pip install --no-cache-dir pytest
"""  # noqa: E501

NODE = r"""
# Node: node_modules at the file system root, where Node's lookup from /workspace finds it.
RUN cd /deps && if [ -f package-lock.json ] || [ -f npm-shrinkwrap.json ]; \
    then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi \
 && mv node_modules /node_modules
ENV PATH=/node_modules/.bin:$PATH
"""

RUST = r"""
# Rust: the toolchain from Debian and the crates fetched now, so that gates build offline.
RUN apt-get update && apt-get install -y --no-install-recommends cargo \
 && rm -rf /var/lib/apt/lists/*
ENV CARGO_HOME=/opt/cargo CARGO_NET_OFFLINE=true
RUN cd /deps && mkdir -p src && touch src/lib.rs && CARGO_NET_OFFLINE=false cargo fetch
"""

GO = r"""
# Go: the toolchain from Debian and the modules downloaded now, so that gates build offline.
RUN apt-get update && apt-get install -y --no-install-recommends golang \
 && rm -rf /var/lib/apt/lists/*
ENV GOPATH=/opt/go GOFLAGS=-mod=mod GOPROXY=off
RUN cd /deps && GOPROXY=https://proxy.golang.org go mod download
"""


def dockerfile_text(detection: Detection, base_image: str) -> str:
    sections = {"python": PYTHON, "node": NODE, "rust": RUST, "go": GO}
    chosen = [sections[s] for s in sections if s in detection.stacks]
    if not chosen:
        raise SandboxError(
            "No known stack (Python, Node, Rust, Go) found in this repository.",
            f"Write {DOCKERFILE} yourself (FROM {base_image}, install what your tests need), "
            "then run `supervisor sandbox build`.",
        )
    return (
        HEADER
        + "# an edited file. Its dependency files are copied to /deps at build time.\n"
        + f"FROM {base_image}\nUSER root\n"
        + "COPY extra-ca/ /usr/local/share/ca-certificates/\n"
        + "RUN if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then "
        + "update-ca-certificates >/dev/null; fi\n"
        + "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt "
        + "NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt "
        + "npm_config_cafile=/etc/ssl/certs/ca-certificates.crt\n"
        + "COPY deps/ /deps/\n"
        + "".join(chosen)
        + "\nUSER 65534:65534\nWORKDIR /workspace\n"
    )


def write_dockerfile(repo: Path, detection: Detection, base_image: str) -> tuple[Path, bool]:
    """Write the project Dockerfile unless one exists (the user's edits win); True if written."""
    path = repo / DOCKERFILE
    if path.exists():
        return path, False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dockerfile_text(detection, base_image))
    return path, True


def dependency_files(tree: Path | CommitFiles) -> dict[str, bytes]:
    """The top-level dependency files of a commit (as blobs) or a directory, by name.

    A dependency file that is a symlink is refused: it could name any file on the host."""
    if isinstance(tree, Path):
        names = sorted(p.name for p in tree.iterdir() if DEPENDENCY_FILES.match(p.name))
        links = [n for n in names if (tree / n).is_symlink()]
        found = read_regular(tree, names)
    else:
        names = [p for p in [*tree.files(), *tree.symlinks()] if DEPENDENCY_FILES.match(p)]
        links = [n for n in names if n in tree.symlinks()]
        found = tree.read_many(sorted(names))
    if links:
        raise SandboxError(
            f"Dependency files that are symlinks are refused: {', '.join(links)}.",
            "Commit the dependency file itself, not a link to it.",
        )
    return dict(sorted(found.items()))


@dataclass(frozen=True)
class ProjectImage:
    tag: str
    content_hash: str
    files: list[str]
    contents: dict[str, bytes] = field(default_factory=dict, compare=False, repr=False)


def image_for(repo: Path, tree: Path | CommitFiles, base_id: str) -> ProjectImage | None:
    """The image tag for the dependency files in `tree` (a commit's blobs, or a directory);
    None without a Dockerfile."""
    dockerfile = repo / DOCKERFILE
    if not dockerfile.is_file():
        return None
    digest = hashlib.sha256(dockerfile.read_bytes() + base_id.encode())
    files = dependency_files(tree)
    for name, data in files.items():
        digest.update(name.encode() + b"\0" + data)
    content = digest.hexdigest()[:16]
    project = hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:12]
    return ProjectImage(f"supervisor-project-{project}:{content}", content, list(files), files)


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
        shutil.copy(repo / DOCKERFILE, context / "Dockerfile")
        (context / "deps").mkdir()
        (context / "extra-ca").mkdir()
        contents = image.contents or dependency_files(tree)
        for name in image.files:
            (context / "deps" / name).write_bytes(contents[name])
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
                text = chunk.get("stream") or ""
                if text:
                    log.append(text)
                    if on_output is not None:
                        on_output(text)
                if "error" in chunk:
                    raise _build_error(repo, chunk["error"], log)
        except docker.errors.APIError as e:
            raise _build_error(repo, str(e.explanation or e), log) from e
    return time.monotonic() - started


def project_images(client: docker.DockerClient, repo: Path) -> list[Any]:
    return client.images.list(filters={"label": f"{LABEL_PROJECT}={repo.resolve()}"})


def _build_error(repo: Path, message: str, log: list[str]) -> SandboxError:
    tail = "".join(log).strip().splitlines()[-15:]
    return SandboxError(
        f"Building the project sandbox image failed: {message.strip()}\n"
        + "\n".join(f"  | {line}" for line in tail),
        f"Fix the dependency or {repo / DOCKERFILE} (see the build output above), then run "
        "`supervisor sandbox build`; nothing else was changed.",
    )
