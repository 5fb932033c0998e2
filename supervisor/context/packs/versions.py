"""Version ranges of role packs, resolved against a repository's tags.

A pack's versions are its git tags (`1.2.0` or `v1.2.0`); a request is a tag, a range in PEP 440
(`>=1.0,<2`) or npm's caret/tilde (`^1.0`, `~1.2`), which people write for semver. `packaging`
does the comparing, so pre-releases and odd tags behave as pip users expect.
"""

from __future__ import annotations

import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

_SHORT = re.compile(r"^([\^~])\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?$")


def specifier(text: str) -> SpecifierSet | None:
    """The range `text` names, or None when it is no range (a tag, a branch or a commit)."""
    text = text.strip()
    short = _SHORT.match(text)
    if short:
        op, major_s, minor_s, patch_s = short.groups()
        major, minor, patch = int(major_s), int(minor_s or 0), int(patch_s or 0)
        low = f">={major}.{minor}.{patch}"
        if op == "~":
            high = f"<{major}.{minor + 1}" if minor_s else f"<{major + 1}"
        elif major > 0:
            high = f"<{major + 1}"
        else:
            high = f"<0.{minor + 1}" if minor > 0 or not patch_s else f"<0.0.{patch + 1}"
        return SpecifierSet(f"{low},{high}")
    if not text or text[0] not in "<>=!~":
        return None
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        return None


def version(text: str) -> Version | None:
    try:
        return Version(text[1:] if text[:1] in "vV" else text)
    except InvalidVersion:
        return None


def best_tag(tags: list[str], wanted: SpecifierSet | None) -> str | None:
    """The tag of the highest version in range (any version when `wanted` is None)."""
    found = [(v, t) for t in tags if (v := version(t)) is not None]
    if wanted is not None:
        found = [(v, t) for v, t in found if wanted.contains(v, prereleases=False)]
    else:
        found = [(v, t) for v, t in found if not v.is_prerelease]
    return max(found)[1] if found else None


def satisfies(have: str, wanted: str | None) -> bool:
    """Whether version `have` lies in the range `wanted` (an exact version when it is none)."""
    if not wanted:
        return True
    parsed = version(have)
    spec = specifier(wanted)
    if parsed is None:
        return have == wanted
    if spec is None:
        exact = version(wanted)
        return exact is not None and exact == parsed
    return spec.contains(parsed, prereleases=True)


def order(text: str) -> Version:
    """A sort key: the version, or 0 for a name that is none (a branch, a commit)."""
    return version(text) or Version("0")
