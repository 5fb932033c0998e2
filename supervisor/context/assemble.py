"""Packing a role's view of the repository, within its token budget.

The supervisor decides what a role sees: its context strategy lists sections in priority order
(target files, their imports, the diff, related files, the file tree); the prompt's own text
(system and task) comes first of all. Everything is redacted before it is counted, secret-looking
files never leave the host, and when the whole exceeds the budget the lowest-priority items go
first, each one recorded. The selected files are packed by the pinned Repomix, kept running
(supervisor/context/packer.py); its own secret scan may still drop a file, which is recorded too.

A worker's worktree is never read by path: the engine passes the commit the step starts from
(`CommitFiles`), whose files are blobs; symlinks are not files here and are never followed.
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from supervisor.context import packer, tokens
from supervisor.core import process, trustmap
from supervisor.core.config import read_yaml, validate
from supervisor.core.errors import ConfigError
from supervisor.core.redaction import is_secret_file, redact
from supervisor.core.resources import CONFIG_DIR
from supervisor.guard.reading import read_regular
from supervisor.project.imports import resolve_imports
from supervisor.workspace import treedata

if TYPE_CHECKING:
    from supervisor.context.project_scope import ProjectScope
    from supervisor.context.roles import Role

MAX_FILE_BYTES = 256_000
FILE_OVERHEAD_TOKENS = 12  # the <file path="..."> wrapper Repomix puts around each file
TREE_LINES = 1500
FILE_PATH = re.compile(r'^<file path="([^"]+)">$', re.M)
DEFAULT_STRATEGY = {
    "plan": "planner_docset",
    "implementation": "implementer_targeted",
    "review": "reviewer_diff",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Section(_Model):
    kind: Literal["target", "imports", "diff", "surface", "related", "tree"]
    """`surface`: the public surface of the projects a component's project depends on
    (supervisor/context/project_scope.py); a strategy without it gets it after its target,
    imports and diff sections."""
    include: list[str] = Field(default_factory=list)
    only_matching_targets: bool = False
    """For `related`: keep only files whose name mentions a target's (their tests)."""


class Strategy(_Model):
    name: str
    description: str = ""
    sections: list[Section]


@dataclass
class Item:
    section: str
    path: str | None  # None for text sections (diff, tree)
    text: str
    tokens: int
    omitted: int = 0  # lines a text section leaves out (the tree's files past TREE_LINES)


@dataclass
class Pack:
    text: str
    strategy: str
    budget: int
    prompt_tokens: int
    tokens: int
    files: list[str] = field(default_factory=list)
    pruned: list[dict[str, Any]] = field(default_factory=list)
    redactions: dict[str, int] = field(default_factory=dict)
    excluded_secret_files: list[str] = field(default_factory=list)
    dropped_by_repomix: list[str] = field(default_factory=list)
    truncated: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    project: str | None = None
    """The monorepo project the pack is scoped to (None: the whole repository)."""
    surface_of: list[str] = field(default_factory=list)
    """The projects whose public surface it holds."""
    ahead: bool = False
    """Gathered while the step before ran (supervisor/context/ahead.py)."""

    def summary(self) -> dict[str, Any]:
        """For the step's events: what was packed, pruned and redacted (never the secrets)."""
        return {
            "strategy": self.strategy,
            "files": self.files,
            "tokens": self.tokens,
            "prompt_tokens": self.prompt_tokens,
            "budget": self.budget,
            "pruned": self.pruned,
            "truncated": self.truncated,
            "redactions": self.redactions,
            "excluded_secret_files": self.excluded_secret_files,
            "dropped_by_repomix_secret_scan": self.dropped_by_repomix,
            "seconds": round(self.seconds, 3),
            "ahead": self.ahead,
            **({"project": self.project, "surface_of": self.surface_of} if self.project else {}),
        }


def load_strategy(name: str, repo: Path | None) -> Strategy:
    if name.startswith("@pack/"):  # an installed pack's own (supervisor/context/packs/roles.py)
        from supervisor.context.packs.roles import pack_strategy

        path = pack_strategy(repo, name)
        return validate(Strategy, read_yaml(path), path)
    places = [CONFIG_DIR / "context_strategies"]
    if repo is not None:
        places.insert(0, trustmap.repo_path(repo, trustmap.STRATEGIES, trustmap.DATA))
    for directory in places:
        path = directory / f"{name}.yaml"
        if path.is_file():
            return validate(Strategy, read_yaml(path), path)
    raise ConfigError(
        f"Unknown context strategy '{name}' (looked in {', '.join(str(p) for p in places)}).",
        "Use one of the files in config/context_strategies/, or add yours to "
        ".supervisor/context_strategies/.",
    )


class DirFiles:
    """A directory the user owns (their checkout, for a preview): its tracked files, read only
    when they are regular files reached through real directories."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def files(self) -> list[str]:
        out = process.run(["git", *treedata.SAFE_CONFIG, "-C", str(self.root), "ls-files", "-z"])
        return [f for f in out.stdout.split("\0") if f]

    def read_many(self, paths: list[str]) -> dict[str, bytes]:
        return read_regular(self.root, paths)


Source = DirFiles | treedata.CommitFiles


@dataclass
class Rendered:
    """Items packed by Repomix, redacted and counted."""

    text: str
    packed: list[str]
    dropped: list[str]
    counts: dict[str, int]
    tokens: int


@dataclass
class Gathered:
    """A role's context selected, read, redacted and counted, not yet fitted to its budget.
    Why apart: all of it follows from the commit, the role's context settings and strategy, the
    targets, the diff and the scope, none of it from the prompt around it, so it can be made while
    the step before runs (supervisor/context/ahead.py); `whole` is every item packed, which is
    the pack itself whenever the prompt leaves room for all of it."""

    strategy: str
    items: list[Item]
    excluded: list[str]
    whole: Rendered | None = None
    project: str | None = None
    surface_of: list[str] = field(default_factory=list)


class Gatherings(Protocol):
    """Where packs gathered ahead are found (supervisor/context/ahead.py)."""

    def take(
        self,
        source: Source,
        role: Role,
        strategy: Strategy,
        targets: list[str],
        diff: str,
        scope: ProjectScope | None,
    ) -> Gathered | None: ...


def build_pack(
    worktree: Path | Source,
    role: Role,
    *,
    repo: Path | None,
    prompt_tokens: int,
    targets: list[str] | None = None,
    diff: str = "",
    scope: ProjectScope | None = None,
    ahead: Gatherings | None = None,
) -> Pack:
    """Select, redact, count and pack; `prompt_tokens` is the prompt without any context.
    `scope`: a component's project in a monorepo, whose own files and whose dependencies'
    public surface are all it sees (None: the whole repository). `ahead`: what was gathered
    while the step before ran, used when it was gathered from exactly these inputs."""
    started = time.monotonic()
    strategy = strategy_for(role, repo)
    budget = role.context.token_budget
    if prompt_tokens >= budget:
        raise ConfigError(
            f"Role '{role.name}' has a token budget of {budget}, but its prompt alone (system and "
            f"task) takes {prompt_tokens} tokens, leaving nothing for context.",
            f"Raise context.token_budget for '{role.name}' or shorten the task description.",
        )
    source = DirFiles(worktree) if isinstance(worktree, Path) else worktree
    made = ahead.take(source, role, strategy, targets or [], diff, scope) if ahead else None
    found = made or gather(source, role, strategy, targets or [], diff, scope)
    pack = fit(source, found, budget, prompt_tokens)
    pack.ahead = made is not None
    pack.seconds = time.monotonic() - started
    return pack


def strategy_for(role: Role, repo: Path | None) -> Strategy:
    return load_strategy(role.context.strategy or DEFAULT_STRATEGY[role.output], repo)


def gather(
    source: Source,
    role: Role,
    strategy: Strategy,
    targets: list[str],
    diff: str,
    scope: ProjectScope | None,
    *,
    whole: bool = False,
) -> Gathered:
    """What the role would see with no budget; `whole`: packed as well (made ahead)."""
    spec = role.context
    files = source.files()
    secret = {f for f in files if is_secret_file(f)}
    excluded = sorted(secret)
    usable = {f for f in files if f not in secret and not _matches_any(f, spec.exclude)}
    surface: list[str] = []
    if scope is not None:
        surface = scope.surface(usable, lambda p: _read(source, p))
        usable = {f for f in usable if scope.visible(f) or f in targets} | set(surface)
    items = _gather(source, strategy, spec, usable, targets, diff, surface)
    if scope is not None:  # first: what the worker sees is a part of the repository, and why
        note = scope.note()
        items.insert(0, Item("scope", None, note, tokens.count(note) + 20))
    return Gathered(
        strategy=strategy.name,
        items=items,
        excluded=excluded,
        whole=_render_counted(source, items) if whole else None,
        project=scope.name if scope is not None else None,
        surface_of=[d.name for d in scope.dependencies] if scope is not None else [],
    )


def fit(source: Source, found: Gathered, budget: int, prompt_tokens: int) -> Pack:
    """The gathered context within what the prompt leaves of the budget: the lowest-priority
    items go first, each recorded; Repomix's wrapper may cost more than estimated, so the
    result is counted again and shaved if need be."""
    items = [dataclasses.replace(i) for i in found.items]  # shaved here, kept as gathered there
    available = budget - prompt_tokens
    pruned: list[dict[str, Any]] = []
    for attempt in range(4):
        while sum(i.tokens for i in items) > available and items:
            item = items.pop()
            pruned.append({"section": item.section, "path": item.path, "tokens": item.tokens})
        reuse = found.whole if attempt == 0 and not pruned else None
        done = reuse if reuse is not None else _render_counted(source, items)
        if done.tokens <= available or not items:
            break
        # Repomix's wrapper cost more than estimated: shave the lowest-priority item, pack again.
        items[-1].tokens += done.tokens - available
    return Pack(
        text=done.text,
        strategy=found.strategy,
        budget=budget,
        prompt_tokens=prompt_tokens,
        tokens=done.tokens,
        files=list(done.packed),
        pruned=pruned,
        redactions=dict(done.counts),
        excluded_secret_files=list(found.excluded),
        dropped_by_repomix=list(done.dropped),
        truncated=[
            {"section": i.section, "shown_lines": TREE_LINES, "omitted_lines": i.omitted}
            for i in items
            if i.omitted
        ],
        project=found.project,
        surface_of=list(found.surface_of),
    )


def _render_counted(source: Source, items: list[Item]) -> Rendered:
    text, packed, dropped = _render(source, items)
    text, counts = redact(text)
    return Rendered(text, packed, dropped, counts, tokens.count(text))


def scope_tokens(source: Source, role: Role, task: str, targets: list[str]) -> int:
    """The tokens a component's planned scope needs in its worker's pack before any pruning:
    its task and its own files (a `dir/` names every file under it) as they would be packed,
    redacted, with Repomix's wrapper. Cheap (no Repomix run): the decomposition's token-budget
    check (supervisor/workflow/decompose.py) compares it with the role's budget."""
    usable = [
        f
        for f in source.files()
        if not is_secret_file(f) and not _matches_any(f, role.context.exclude)
    ]
    wanted = [
        f for f in usable if any(f == t or (t.endswith("/") and f.startswith(t)) for t in targets)
    ]
    total = tokens.count(redact(task)[0])
    for data in source.read_many(wanted).values():  # one git call for all of them
        if len(data) <= MAX_FILE_BYTES and b"\0" not in data[:8192]:  # as `_read` packs
            text = data.decode("utf-8", errors="replace")
            total += tokens.count(redact(text)[0]) + FILE_OVERHEAD_TOKENS
    return total


def _gather(
    source: Source,
    strategy: Strategy,
    spec: Any,
    usable: set[str],
    targets: list[str],
    diff: str,
    surface: list[str] | None = None,
) -> list[Item]:
    chosen: list[Item] = []
    seen: set[str] = set()

    def add_file(section: str, path: str) -> None:
        if path in seen or path not in usable:
            return
        seen.add(path)
        text = _read(source, path)
        if text is None:
            return
        clean, _ = redact(text)
        chosen.append(Item(section, path, clean, tokens.count(clean) + FILE_OVERHEAD_TOKENS))

    for pattern in spec.always_include:
        for path in sorted(f for f in usable if _match(f, pattern)):
            add_file("always_include", path)
    for section in _with_surface(strategy.sections) if surface else strategy.sections:
        if section.kind == "surface":
            for path in surface or []:
                add_file("surface", path)
        elif section.kind == "target":
            for path in targets:
                add_file("target", path)
        elif section.kind == "imports":
            for path in targets:
                for imported in resolve_imports(lambda p: _read(source, p), path, usable):
                    add_file("imports", imported)
        elif section.kind == "diff" and diff.strip():
            # Kept raw: the whole pack is redacted (and counted) once, after rendering.
            chosen.append(Item("diff", None, diff, tokens.count(redact(diff)[0]) + 20))
        elif section.kind == "related":
            patterns = [*section.include, *spec.include]
            stems = [Path(t).stem for t in targets]
            for path in sorted(f for f in usable if _matches_any(f, patterns)):
                if section.only_matching_targets and not any(s in path for s in stems):
                    continue
                add_file("related", path)
        elif section.kind == "tree":
            listing, omitted = _tree(sorted(usable))
            chosen.append(Item("tree", None, listing, tokens.count(listing) + 20, omitted))
    return chosen


def _with_surface(sections: list[Section]) -> list[Section]:
    """The strategy's sections with `surface` after its target, imports and diff (what the
    component works on comes first; what it builds against next; the rest after)."""
    if any(s.kind == "surface" for s in sections):
        return sections
    first = [i for i, s in enumerate(sections) if s.kind in ("target", "imports", "diff")]
    at = first[-1] + 1 if first else 0
    return [*sections[:at], Section(kind="surface"), *sections[at:]]


def _tree(files: list[str]) -> tuple[str, int]:
    """The file listing, at most TREE_LINES files; a cut says so in the listing itself, so the
    worker knows there is more than it sees. Returns (listing, files left out)."""
    omitted = max(0, len(files) - TREE_LINES)
    listing = "\n".join(files[:TREE_LINES])
    if omitted:
        listing += (
            f"\n[file tree truncated: {omitted} more file(s) not listed; the first {TREE_LINES} "
            f"of {len(files)} are shown]"
        )
    return listing, omitted


def _render(source: Source, items: list[Item]) -> tuple[str, list[str], list[str]]:
    paths = [i.path for i in items if i.path is not None]
    parts: list[str] = []
    packed: list[str] = []
    if paths:
        output = packer.pack_contents(source.read_many(paths))
        parts.append(output.strip())
        packed = FILE_PATH.findall(output)
    for item in items:
        if item.section == "scope":
            parts.insert(0, f"<project_scope>\n{item.text}\n</project_scope>")
        elif item.section == "diff":
            parts.append(f"<git_diff>\n{item.text}\n</git_diff>")
        elif item.section == "tree":
            parts.append(f"<file_tree>\n{item.text}\n</file_tree>")
    dropped = [p for p in paths if p not in packed]
    return "\n\n".join(p for p in parts if p), packed, dropped


def _read(source: Source, path: str) -> str | None:
    data = source.read_many([path]).get(path)
    if data is None or len(data) > MAX_FILE_BYTES:
        return None
    if b"\0" in data[:8192]:
        return None  # binary
    return data.decode("utf-8", errors="replace")


def _matches_any(path: str, patterns: list[str]) -> bool:
    return any(_match(path, p) for p in patterns)


def _match(path: str, pattern: str) -> bool:
    """Glob with `**`; a pattern without a slash matches a file name at any depth."""
    if "/" not in pattern.rstrip("/"):
        return bool(_compile(pattern).fullmatch(path.rsplit("/", 1)[-1]))
    return bool(_compile(pattern.lstrip("/")).fullmatch(path))


_CACHE: dict[str, re.Pattern[str]] = {}


def _compile(pattern: str) -> re.Pattern[str]:
    if pattern not in _CACHE:
        out, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                out, i = out + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                out, i = out + ".*", i + 2
            elif pattern[i] == "*":
                out, i = out + "[^/]*", i + 1
            elif pattern[i] == "?":
                out, i = out + "[^/]", i + 1
            else:
                out, i = out + re.escape(pattern[i]), i + 1
        _CACHE[pattern] = re.compile(out)
    return _CACHE[pattern]
