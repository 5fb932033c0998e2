"""Reading a workspace's manifests as data: which directories are members, and what each member
says it depends on.

The repository is untrusted, so nothing here runs a package manager or anything else from it:
manifests are parsed with tomllib, PyYAML's safe loader and json (go.mod and go.work, a line
format, by the few lines we need), each read only as a regular file reached without a symlink
and only up to MAX_MANIFEST_BYTES. A manifest that cannot be read or parsed becomes a warning
naming the file; the caller carries on with what it has.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import stat
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MAX_MANIFEST_BYTES = 1_000_000


@dataclass
class Reader:
    """Bounded, symlink-free reads below one root, with the warnings they produced."""

    root: Path
    warnings: list[str] = field(default_factory=list)

    def text(self, rel: str) -> str | None:
        """The file's text, or None (absent, a symlink, not a regular file, or too large)."""
        parts = rel.split("/")
        try:
            for i in range(1, len(parts)):
                if not stat.S_ISDIR(os.lstat(self.root.joinpath(*parts[:i])).st_mode):
                    return None
            fd = os.open(self.root / rel, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                return None
            if info.st_size > MAX_MANIFEST_BYTES:
                self.warn(rel, f"larger than {MAX_MANIFEST_BYTES // 1000} kB, not read")
                return None
            return handle.read(MAX_MANIFEST_BYTES).decode("utf-8", errors="replace")

    def toml(self, rel: str) -> dict[str, Any] | None:
        text = self.text(rel)
        if text is None:
            return None
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            self.warn(rel, f"is not valid TOML ({e})")
            return None

    def json(self, rel: str) -> dict[str, Any] | None:
        text = self.text(rel)
        if text is None:
            return None
        try:
            data = json.loads(text)
        except ValueError as e:
            self.warn(rel, f"is not valid JSON ({e})")
            return None
        if not isinstance(data, dict):
            self.warn(rel, "does not hold a mapping at its top level")
            return None
        return data

    def yaml(self, rel: str) -> dict[str, Any] | None:
        text = self.text(rel)
        if text is None:
            return None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            self.warn(rel, f"is not valid YAML ({str(e).splitlines()[0]})")
            return None
        if not isinstance(data, dict):
            self.warn(rel, "does not hold a mapping at its top level")
            return None
        return data

    def warn(self, rel: str, problem: str) -> None:
        self.warnings.append(f"{rel} {problem}; its workspace information was skipped.")


# -- what a manifest says -----------------------------------------------------------------------


@dataclass(frozen=True)
class Need:
    """One dependency a member's manifest declares: by package name, by path, or both."""

    name: str | None
    path: str | None
    """Repository-relative (already joined to the member's directory), or None."""
    why: str


def strings(value: Any) -> list[str]:
    """The strings of a manifest list (anything else in it is ignored)."""
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def join(base: str, relative: str) -> str | None:
    """`relative` taken from directory `base`, inside the repository; None when it leaves it."""
    if relative.startswith("/") or "\\" in relative:
        return None
    joined = posixpath.normpath(posixpath.join(base, relative)) if base != "." else relative
    joined = posixpath.normpath(joined)
    if joined == ".." or joined.startswith("../") or joined.startswith("/"):
        return None
    return joined


def pnpm_members(reader: Reader) -> list[str] | None:
    data = reader.yaml("pnpm-workspace.yaml")
    return None if data is None else strings(data.get("packages"))


def npm_members(reader: Reader) -> list[str] | None:
    data = reader.json("package.json")
    if data is None or "workspaces" not in data:
        return None
    spaces = data["workspaces"]
    return strings(spaces.get("packages") if isinstance(spaces, dict) else spaces)


def cargo_members(reader: Reader) -> tuple[list[str], list[str]] | None:
    data = reader.toml("Cargo.toml")
    workspace = table((data or {}).get("workspace"))
    if not workspace:
        return None
    return strings(workspace.get("members")), strings(workspace.get("exclude"))


def uv_members(reader: Reader) -> tuple[list[str], list[str]] | None:
    data = reader.toml("pyproject.toml")
    workspace = table(table(table((data or {}).get("tool")).get("uv")).get("workspace"))
    if not workspace:
        return None
    return strings(workspace.get("members")), strings(workspace.get("exclude"))


GO_DIRECTIVE = re.compile(r"^\s*(use|require|replace|module)\b\s*(\(?)\s*(.*?)\s*$")


def go_directives(text: str) -> Iterator[tuple[str, str]]:
    """(directive, argument) of a go.mod or go.work, blocks `use ( ... )` unrolled, comments
    dropped."""
    block: str | None = None
    for raw in text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if block is not None:
            if line == ")":
                block = None
            else:
                yield block, line
            continue
        match = GO_DIRECTIVE.match(line)
        if match is None:
            continue
        directive, opens, rest = match.groups()
        if opens and not rest:
            block = directive
        elif rest:
            yield directive, rest


def go_work_members(reader: Reader) -> list[str] | None:
    text = reader.text("go.work")
    if text is None:
        return None
    return [arg.strip('"') for directive, arg in go_directives(text) if directive == "use"]


# -- each ecosystem's dependencies of one member ----------------------------------------------

NODE_SECTIONS = ("dependencies", "devDependencies", "peerDependencies", "optionalDependencies")
NODE_PATH_PROTOCOLS = ("file:", "link:", "portal:")


def node_package(reader: Reader, member: str) -> tuple[str | None, list[Need]]:
    manifest = f"{member}/package.json"
    data = reader.json(manifest) or {}
    needs: list[Need] = []
    for section in NODE_SECTIONS:
        for name, spec in table(data.get(section)).items():
            spec = spec if isinstance(spec, str) else ""
            why = f"{manifest}: {section} {name} {spec}".rstrip()
            path = None
            for protocol in NODE_PATH_PROTOCOLS:
                if spec.startswith(protocol):
                    path = join(member, spec[len(protocol) :])
            needs.append(Need(name, path, why))
    own = data.get("name")
    return (own if isinstance(own, str) else None), needs


CARGO_SECTIONS = ("dependencies", "dev-dependencies", "build-dependencies")


def cargo_package(
    reader: Reader, member: str, workspace_deps: Mapping[str, Any]
) -> tuple[str | None, list[Need]]:
    manifest = f"{member}/Cargo.toml"
    data = reader.toml(manifest) or {}
    tables = [table(data.get(s)) for s in CARGO_SECTIONS]
    for target in table(data.get("target")).values():
        tables += [table(table(target).get(s)) for s in CARGO_SECTIONS]
    needs: list[Need] = []
    for deps in tables:
        for name, spec in deps.items():
            spec = table(spec)
            path = None
            if isinstance(spec.get("path"), str):
                path = join(member, spec["path"])
            elif spec.get("workspace") is True:
                root_spec = table(workspace_deps.get(name))
                if isinstance(root_spec.get("path"), str):
                    path = join(".", root_spec["path"])
            needs.append(Need(name, path, f"{manifest}: {name} {_inline(spec)}".rstrip()))
    own = table(data.get("package")).get("name")
    return (own if isinstance(own, str) else None), needs


REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._\-]*)")
PDM_PATH = re.compile(r"file:///\$\{PROJECT_ROOT\}/([^\s#;]+)")


def python_package(reader: Reader, member: str) -> tuple[str | None, list[Need]]:
    """uv (sources), Poetry (path dependencies) and PDM (`file:///${PROJECT_ROOT}/..`) alike:
    every name the project requires, and every path it names."""
    manifest = f"{member}/pyproject.toml" if member != "." else "pyproject.toml"
    data = reader.toml(manifest) or {}
    project = table(data.get("project"))
    tool = table(data.get("tool"))
    needs: list[Need] = []
    requirements = [*strings(project.get("dependencies"))]
    for group in table(project.get("optional-dependencies")).values():
        requirements += strings(group)
    for group in table(data.get("dependency-groups")).values():
        requirements += strings(group)
    for group in table(table(tool.get("pdm")).get("dev-dependencies")).values():
        requirements += strings(group)
    for name, spec in table(table(tool.get("uv")).get("sources")).items():
        spec = table(spec)
        path = join(member, spec["path"]) if isinstance(spec.get("path"), str) else None
        why = f"{manifest}: [tool.uv.sources] {name} {_inline(spec)}"
        needs.append(Need(name, path, why))
    poetry = table(tool.get("poetry"))
    sections = [table(poetry.get("dependencies")), table(poetry.get("dev-dependencies"))]
    sections += [table(table(g).get("dependencies")) for g in table(poetry.get("group")).values()]
    for deps in sections:
        for name, spec in deps.items():
            spec = table(spec)
            if isinstance(spec.get("path"), str):
                why = f"{manifest}: [tool.poetry] {name} {_inline(spec)}"
                needs.append(Need(name, join(member, spec["path"]), why))
    for requirement in requirements:
        found = PDM_PATH.search(requirement)
        match = REQUIREMENT_NAME.match(requirement.removeprefix("-e").strip())
        required = match.group(1) if match and not requirement.startswith("-e") else None
        path = join(member, found.group(1)) if found else None
        needs.append(Need(required, path, f"{manifest}: {requirement}"))
    own = project.get("name") or poetry.get("name")
    return (own if isinstance(own, str) else None), needs


def python_layout(reader: Reader, member: str) -> str | None:
    """`poetry` or `pdm` when the member's pyproject is managed by one, else None."""
    manifest = f"{member}/pyproject.toml" if member != "." else "pyproject.toml"
    tool = table((reader.toml(manifest) or {}).get("tool"))
    return "poetry" if "poetry" in tool else "pdm" if "pdm" in tool else None


def go_module(reader: Reader, member: str) -> tuple[str | None, list[Need]]:
    manifest = f"{member}/go.mod"
    text = reader.text(manifest) or ""
    name: str | None = None
    needs: list[Need] = []
    for directive, arg in go_directives(text):
        words = arg.split()
        if directive == "module" and words:
            name = words[0].strip('"')
        elif directive == "require" and words:
            needs.append(Need(words[0], None, f"{manifest}: require {arg}"))
        elif directive == "replace" and "=>" in words:
            target = words[words.index("=>") + 1 :]
            if target and target[0].startswith((".", "/")):
                path = join(member, target[0])
                needs.append(Need(words[0], path, f"{manifest}: replace {arg}"))
    return name, needs


def _inline(spec: Mapping[str, Any]) -> str:
    if not spec:
        return ""
    return "{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in spec.items()) + "}"
