"""Fetching a role pack with git and nothing else.

A pack's repository is someone else's: nothing in it runs on the host. Git is told to ignore
every hook (`core.hooksPath=/dev/null`, which also beats a hooks path in the user's own git
config), never to recurse into submodules, never to use the `ext::` transport (which runs a
command), and never to ask for a password. The files are read out of git objects with
`git archive` into a staging folder: regular files only, so a symlink in the pack cannot point
the installer at a file outside it.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from supervisor.core.config import user_dir
from supervisor.core.errors import ConfigError, GitError
from supervisor.core.process import run

GIT = [
    "git",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "protocol.ext.allow=never",
    "-c",
    "submodule.recurse=false",
    "-c",
    "advice.detachedHead=false",
]
MAX_PACK_BYTES = 5 * 1024 * 1024
"""A role pack is YAML and templates: anything this big is not one (and would be hashed at every
role lookup)."""
_SHORTHAND = re.compile(r"^[A-Za-z0-9.-]+\.[A-Za-z]{2,}/[\w.-]+/[\w.-]+$")
_OWNER_REPO = re.compile(r"^[\w.-]+/[\w.-]+$")


def git_env() -> dict[str, str]:
    return {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false"}


def git(*args: str, cwd: Path | None = None, timeout: float = 300) -> str:
    result = run([*GIT, *args], cwd=cwd, timeout=timeout, check=False, env=git_env())
    if result.returncode != 0:
        raise GitError(
            f"git {' '.join(args[:3])} failed: {(result.stderr or result.stdout).strip()[-600:]}",
            "Check the pack's source (URL or path) and the version asked for.",
        )
    return result.stdout


def source_url(source: str) -> str:
    """A git URL for SOURCE: a URL or scp-like address as given, a local folder as its absolute
    path, `host/owner/repo` over https, and `owner/repo` on github.com."""
    if source.startswith("-") or "::" in source.split("/", 1)[0]:
        raise ConfigError(
            f"'{source}' is not a pack source git may fetch.",
            "Give a git URL (https://…, ssh://…, git@host:owner/repo), host/owner/repo, or a "
            "local path.",
        )
    if "://" in source or re.match(r"^[\w.-]+@[\w.-]+:", source):
        return source
    path = Path(source).expanduser()
    if path.exists():
        return str(path.resolve())
    if _SHORTHAND.match(source):
        return f"https://{source.removesuffix('.git')}.git"
    if _OWNER_REPO.match(source):
        return f"https://github.com/{source.removesuffix('.git')}.git"
    raise ConfigError(
        f"Pack source '{source}' is neither a git URL, host/owner/repo, nor an existing path.",
        "Check the spelling, e.g. `supervisor role install github.com/owner/repo@^1.0`.",
    )


def sibling(url: str, name: str) -> str:
    """The repository named `name` next to `url`: a dependency in the same registry."""
    head, _, last = url.rstrip("/").rpartition("/")
    suffix = ".git" if last.endswith(".git") else ""
    return f"{head}/{name}{suffix}"


def cache_dir(url: str) -> Path:
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
    return user_dir() / "cache" / "role-sources" / digest


@dataclass(frozen=True)
class Fetched:
    url: str
    clone: Path


def fetch(url: str) -> Fetched:
    """A bare mirror of the pack's repository in the user's cache, cloned or brought up to date.
    Bare: nothing is checked out, so no checkout can run anything."""
    clone = cache_dir(url)
    if (clone / "HEAD").is_file():
        git("fetch", "--quiet", "--prune", "--tags", "--force", "origin", cwd=clone)
    else:
        clone.parent.mkdir(parents=True, exist_ok=True)
        git(
            "clone",
            "--bare",
            "--quiet",
            "--no-recurse-submodules",
            "--",
            url,
            str(clone),
        )
        git("config", "remote.origin.fetch", "+refs/heads/*:refs/heads/*", cwd=clone)
        (clone / "supervisor-source").write_text(url + "\n")
    return Fetched(url, clone)


def tags(clone: Path) -> list[str]:
    return git("tag", "--list", cwd=clone).split()


def commit_of(clone: Path, ref: str) -> str:
    if ref.startswith("-"):
        raise ConfigError(
            f"'{ref}' is not a version.", "Give a tag, a range, a branch or a commit."
        )
    try:
        return git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=clone).strip()
    except GitError as e:
        raise ConfigError(
            f"'{ref}' is no tag, version range, branch or commit of the pack's repository.",
            f"Its tags: {', '.join(tags(clone)) or '(none)'}.",
        ) from e


def verify_tag(clone: Path, tag: str) -> None:
    try:
        git("verify-tag", "--", tag, cwd=clone)
    except GitError as e:
        raise ConfigError(
            f"Tag '{tag}' of {clone} is not signed by a key you trust: {e.message}",
            "Import the pack author's key (gpg --import), or ask for an unsigned pack by "
            "setting `roles: {require_signed: false}` in ~/.supervisor/config.yaml.",
        ) from e


def export(clone: Path, commit: str, target: Path) -> list[str]:
    """The commit's regular files written under `target` (symlinks and submodules left out);
    their paths, relative."""
    proc = subprocess.run(
        [*GIT, "archive", "--format=tar", commit],
        cwd=clone,
        capture_output=True,
        env=git_env(),
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        raise GitError(f"git archive {commit} failed: {proc.stderr.decode()[-600:]}")
    written: list[str] = []
    total = 0
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if not member.isreg() or ".." in parts or member.name.startswith("/"):
                continue
            total += member.size
            if total > MAX_PACK_BYTES:
                raise ConfigError(
                    f"The pack at commit {commit[:12]} holds more than "
                    f"{MAX_PACK_BYTES // (1024 * 1024)} MB of files ({member.name} and before).",
                    "A role pack is YAML and templates; keep other files out of its repository.",
                )
            data = tar.extractfile(member)
            if data is None:
                continue
            path = target.joinpath(*parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data.read())
            written.append("/".join(parts))
    return sorted(written)
