"""Whether a Node workspace's tests need its own packages built first.

A member whose package.json points `main`, `module`, `types` or `exports` at a build's output
(`./dist/index.mjs`) that the repository does not commit resolves, for a test that imports it,
only once the root's `build` script has run: changesets' own CI runs `pnpm build` before
`pnpm test`, and without it 23 of its 41 test files fail to resolve `@changesets/git`. The gate
runs in a fresh worktree of the candidate, so the detected test gate builds first.

Read as data (supervisor/project/workspace_manifests.py): nothing here runs the project's code.
"""

from __future__ import annotations

import fnmatch
import posixpath
import subprocess
from typing import TYPE_CHECKING, Any

from supervisor.project import workspace_manifests as manifests

if TYPE_CHECKING:
    from pathlib import Path

ENTRY_FIELDS = ("main", "module", "types", "exports")


def unbuilt_entry(repo: Path, files: list[str]) -> str | None:
    """Why the workspace's tests need `build` first (`packages/git/package.json (exports:
    ./dist/index.mjs)`): a member's entry point not in the repository while the root has a
    `build` script; None otherwise (no workspace, no build script, entry points committed)."""
    reader = manifests.Reader(repo)
    patterns = manifests.pnpm_members(reader)
    if patterns is None:
        patterns = manifests.npm_members(reader)
    root = reader.json("package.json") or {}
    if not patterns or not manifests.table(root.get("scripts")).get("build"):
        return None
    committed = _committed(repo)
    for manifest in files:
        member = posixpath.dirname(manifest)
        if posixpath.basename(manifest) != "package.json" or not _member(member, patterns):
            continue
        data = reader.json(manifest) or {}
        for field in ENTRY_FIELDS:
            for target in _targets(data.get(field)):
                path = posixpath.normpath(posixpath.join(member, target))
                present = path in committed if committed is not None else (repo / path).is_file()
                if not present and not path.startswith(".."):
                    return f"{manifest} ({field}: {target})"
    return None


def _member(directory: str, patterns: list[str]) -> bool:
    """Whether a directory is one a workspace pattern (`packages/*`, `site`) names."""
    if not directory or directory == ".":
        return False
    parts = directory.split("/")
    for raw in patterns:
        pattern = raw.strip().removeprefix("./").rstrip("/")
        if pattern.startswith("!"):
            continue
        wanted = pattern.split("/")
        if "**" in wanted:
            head = wanted[: wanted.index("**")]
            if len(parts) > len(head) and all(map(fnmatch.fnmatchcase, parts, head)):
                return True
        elif len(parts) == len(wanted) and all(map(fnmatch.fnmatchcase, parts, wanted)):
            return True
    return False


def _targets(value: Any) -> list[str]:
    """The file paths an entry field names: a string, or every string of an `exports` map
    (conditions and subpaths), but for patterns (`./*`) and bare names."""
    if isinstance(value, str):
        return [value] if value.startswith("./") and "*" not in value else []
    if isinstance(value, dict):
        return [t for v in value.values() for t in _targets(v)]
    if isinstance(value, list):
        return [t for v in value for t in _targets(v)]
    return []


def _committed(repo: Path) -> set[str] | None:
    """The repository's tracked files (git's index), or None outside a git repository."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(repo), "ls-files", "-z"],
            capture_output=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {p for p in listed.stdout.decode("utf-8", "replace").split("\0") if p}
