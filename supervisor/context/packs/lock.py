"""The lock of installed role packs: where each came from, the commit, a hash of every file.

Loading a pack checks its files against the lock, so a pack edited after install (by hand, by a
worker, by a later `git pull` of the project) is refused by name rather than quietly used;
`supervisor role install --update NAME` fetches it again and records the new hashes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from supervisor.core.config import validate
from supervisor.core.errors import ConfigError, PackChangedError
from supervisor.core.plural import counted, plural
from supervisor.core.strict_model import StrictModel


class LockEntry(StrictModel):
    name: str
    version: str
    source: str
    requested: str | None = None
    """The version as asked for (a tag, a range, a branch, a commit), for `role update`."""
    ref: str | None = None
    """The tag the request resolved to (None: a branch or a commit)."""
    commit: str
    files: dict[str, str]
    """Relative path -> sha256 of the content."""
    dependency_of: list[str] = Field(default_factory=list)


class LockFile(StrictModel):
    version: int = 1
    packs: dict[str, LockEntry] = Field(default_factory=dict)


@dataclass(frozen=True)
class Scope:
    """Where packs are installed: the project's `.supervisor/` or the user's directory."""

    name: str  # project | user
    packs_dir: Path
    lock_path: Path

    def read(self) -> LockFile:
        if not self.lock_path.is_file():
            return LockFile()
        try:
            data = json.loads(self.lock_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ConfigError(
                f"{self.lock_path} is not a readable lock file: {e}.",
                "Restore it from version control, or remove it and install the packs again.",
            ) from e
        lock: LockFile = validate(LockFile, data, self.lock_path)
        return lock

    def write(self, lock: LockFile) -> None:
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.lock_path.with_suffix(".lock.tmp")
        tmp.write_text(lock.model_dump_json(indent=2) + "\n", encoding="utf-8")
        tmp.replace(self.lock_path)

    def pack_dir(self, name: str) -> Path:
        return self.packs_dir / name


def file_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file below `root`; a symlink is hashed as its target's name, so replacing
    a file by a link changes the hash."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[rel] = "symlink:" + hashlib.sha256(str(path.readlink()).encode()).hexdigest()
        elif path.is_file():
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def verify(scope: Scope, entry: LockEntry) -> None:
    """Raise PackChangedError naming the pack and the first file that differs from the lock."""
    root = scope.pack_dir(entry.name)
    have = file_hashes(root) if root.is_dir() else {}
    if have == entry.files:
        return
    changed = sorted(p for p in set(have) | set(entry.files) if have.get(p) != entry.files.get(p))
    first = changed[0]
    how = (
        "was added"
        if first not in entry.files
        else "is missing"
        if first not in have
        else "was changed"
    )
    raise PackChangedError(
        f"Role pack '{entry.name}' ({root}) changed since it was installed: {first} {how} "
        f"({counted(len(changed), 'file')} {plural(len(changed), 'differs', 'differ')} from "
        f"{scope.lock_path}); it is not used.",
        f"Run `supervisor role install --update {entry.name}` to fetch it again"
        f"{' with --project' if scope.name == 'project' else ''}, or "
        f"`supervisor role remove {entry.name}`.",
        pack=entry.name,
    )
