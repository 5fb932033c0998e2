"""Interface-first locking: the tech lead's files are checked by a real compiler, then frozen.

Parallel components can only be built side by side if the contracts between them hold still, so
the files an `interfaces: true` step writes are compiled (Python by `py_compile`, TypeScript by
the project's own `tsc --noEmit` when it has one) and then become read-only for every later step.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from supervisor import process

if TYPE_CHECKING:
    from pathlib import Path


def compile_errors(repo: Path, worktree: Path, files: list[str]) -> str | None:
    """What the compilers say about `files` in `worktree`, or None when they accept them."""
    problems: list[str] = []
    python = [f for f in files if f.endswith(".py")]
    if python:
        result = process.run(
            [sys.executable, "-m", "py_compile", *python], cwd=worktree, check=False
        )
        if result.returncode != 0:
            problems.append(f"python -m py_compile: {(result.stderr or result.stdout).strip()}")
    typescript = [f for f in files if f.endswith((".ts", ".tsx"))]
    tsc = repo / "node_modules" / ".bin" / "tsc"
    if typescript and tsc.exists():
        result = process.run(
            [str(tsc), "--noEmit", "--skipLibCheck", *typescript], cwd=worktree, check=False
        )
        if result.returncode != 0:
            problems.append(f"tsc --noEmit: {(result.stdout or result.stderr).strip()}")
    return "\n".join(problems)[-4000:] or None


def touched(locked: list[str], changed: list[str]) -> list[str]:
    """The locked interface files among a step's changes."""
    return sorted(set(locked) & set(changed))
