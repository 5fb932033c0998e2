"""A new module named after one the test runner imports is a protected path.

Why: a gate runs `python -m unittest` or pytest in the candidate's worktree, and the working
directory comes first on the import path. An added `argparse.py` (or `difflib.py`, `pprint.py`,
`signal.py`, …) replaces the standard library module the runner imports: unittest then ran
nothing and exited 0 on broken code. The same holds for the runner's own packages (pytest,
pluggy, …). So a candidate that adds a module or package with such a name, where the gate's
interpreter would find it first, is refused with the name, like a changed protected file.

Where it would be found first: the repository's top level (the gate's working directory),
`src/`, and every directory pytest puts on the path itself (one holding test modules but no
`__init__.py`, in pytest's default "prepend" import mode). Inside a package (`app/json.py`) the
name is harmless and common, so it is not refused. `test` is left out: it is a common folder name
and no runner imports the standard library's regression-test package.
"""

from __future__ import annotations

import posixpath
import re
import sys
from typing import TYPE_CHECKING

import pathspec

from supervisor.workspace.treedata import CommitFiles

if TYPE_CHECKING:
    from pathlib import Path

RUNNER_MODULES = frozenset(
    {
        "pytest",
        "_pytest",
        "py",
        "pluggy",
        "iniconfig",
        "packaging",
        "exceptiongroup",
        "tomli",
        "pygments",
        "colorama",
        "nose",
        "nose2",
        "coverage",
        "xdist",
        "execnet",
        "hypothesis",
        "pytest_cov",
        "pytest_asyncio",
        "pytest_mock",
    }
)
"""The test runners and what they import at start-up."""
REMOVED_STDLIB = frozenset(
    {
        "asynchat",
        "asyncore",
        "distutils",
        "imp",
        "smtpd",
        "aifc",
        "audioop",
        "cgi",
        "cgitb",
        "chunk",
        "crypt",
        "imghdr",
        "mailcap",
        "msilib",
        "nis",
        "nntplib",
        "ossaudiodev",
        "pipes",
        "sndhdr",
        "spwd",
        "sunau",
        "telnetlib",
        "uu",
        "xdrlib",
        "lib2to3",
    }
)
"""Standard library modules of the Pythons a gate may run (3.9+) that this one may lack."""
NOT_SHADOWING = frozenset({"test", "tests", "this", "antigravity"})
MODULE = re.compile(
    r"^(?P<name>[A-Za-z_]\w*)(?:\.pyw?|\.pyc|\.pyd|(?:\.[\w-]+)?\.so"
    r"|/__init__\.(?:pyw?|pyc|pyd|(?:[\w-]+\.)?so))$"
)
SEARCHED_DIRS = ("", "src")


def shadowed_names() -> frozenset[str]:
    return (frozenset(sys.stdlib_module_names) | REMOVED_STDLIB | RUNNER_MODULES) - NOT_SHADOWING


def import_roots(files: list[str]) -> set[str]:
    """Directories whose modules come before the standard library on a gate's import path."""
    present = set(files)
    roots = set(SEARCHED_DIRS)
    for path in files:
        folder, name = posixpath.split(path)
        is_test = name.endswith(".py") and (name.startswith("test") or name.endswith("_test.py"))
        if is_test and posixpath.join(folder, "__init__.py") not in present:
            roots.add(folder)
    return roots


def shadowing(added: list[str], files: list[str]) -> list[str]:
    """The paths among `added` (new in the candidate) that shadow a module the gate's runner
    imports, each named with the module: `argparse.py (shadows the module argparse)`.
    `files`: every file of the candidate, to find the directories pytest searches."""
    names = shadowed_names()
    roots = import_roots(files)
    found: list[str] = []
    for path in added:
        for root in roots:
            prefix = f"{root}/" if root else ""
            if not path.startswith(prefix):
                continue
            match = MODULE.match(path[len(prefix) :])
            if match and match.group("name") in names:
                found.append(f"{path} (shadows the module {match.group('name')})")
                break
    return found


def added_shadows(
    git_dir: Path,
    base: str,
    head: str,
    changed: list[str],
    allowed: list[str],
    already: list[str],
) -> list[str]:
    """`shadowing` for a candidate: its files new since `base`, less what a person allowed for
    this task (`--allow-protected`) and the paths `already` refused as protected."""
    exempt = pathspec.GitIgnoreSpec.from_lines(allowed)
    before, after = CommitFiles(git_dir, base), CommitFiles(git_dir, head)
    added = [
        p
        for p in changed
        if before.entry(p) is None
        and after.entry(p) is not None
        and p not in already
        and not exempt.match_file(p)
    ]
    return shadowing(added, after.files()) if added else []
