"""Interface-first locking: the tech lead's files are checked by a real compiler, then frozen.

Parallel components can only be built side by side if the contracts between them hold still, so
the files an `interfaces: true` step writes are compiled and then become read-only for every later
step. The compilers run in the project's sandbox image, with no network, on a throwaway worktree
(never on the host: the files come from a worker): Python by `py_compile`, TypeScript by the
project's own `tsc --noEmit -p tsconfig.json` (its settings, its type definitions from the image's
node_modules). A TypeScript interface with no compiler in the image is an error, never a pass.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import TYPE_CHECKING

from supervisor.core.errors import ToolMissingError

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.sandbox.base import Sandbox

NO_TSC = "supervisor: no tsc"
WORKSPACE = "/workspace"
TIMEOUT = 600


def compile_errors(
    repo: Path,
    worktree: Path,
    files: list[str],
    sandbox: Sandbox | None = None,
    image: str | None = None,
    labels: dict[str, str] | None = None,
) -> str | None:
    """What the compilers say about `files` in `worktree`, or None when they accept them.

    `image` is the project image (None: the base sandbox image). Raises ToolMissingError when a
    TypeScript file needs a compiler the image does not have."""
    problems: list[str] = []
    python = [f for f in files if f.endswith(".py")]
    typescript = [f for f in files if f.endswith((".ts", ".tsx", ".mts", ".cts"))]
    if (python or typescript) and sandbox is None:
        raise ToolMissingError(
            "The interface files cannot be compiled: no sandbox to run the compiler in.",
            "Interfaces are checked in the project's sandbox image; run the workflow through "
            "`supervisor start-task`, which provides it.",
        )
    if python and sandbox is not None:
        command = "python3 -m py_compile " + " ".join(shlex.quote(f) for f in python)
        code, output = _run(sandbox, worktree, image, command, labels)
        if code != 0:
            problems.append(f"python -m py_compile: {output}")
    configs = [f for f in files if re.fullmatch(r"(.*/)?(tsconfig|jsconfig)[\w.\-]*\.json", f)]
    if configs:
        problems.append(
            f"The interface step changed the compiler configuration ({', '.join(configs)}); "
            "interfaces are checked against the project's own configuration, so leave it as it "
            "is."
        )
    if typescript and sandbox is not None:
        code, output = _run(sandbox, worktree, image, _tsc_command(typescript), labels)
        if NO_TSC in output:
            raise ToolMissingError(
                f"The interface files {', '.join(typescript)} need the TypeScript compiler, and "
                f"the project image ({image or 'the base sandbox image'}) has no `tsc`.",
                "Add typescript to the project's devDependencies (and a tsconfig.json), then "
                "run `supervisor sandbox init`/`supervisor sandbox build`.",
            )
        if code != 0:
            problems.append(f"tsc --noEmit: {output}")
    return "\n".join(problems)[-4000:] or None


def _tsc_command(typescript: list[str]) -> str:
    """The project's own configuration when it has one (`-p` honours its paths, libs and
    strictness, which file arguments would ignore), extended so that the interface files are
    compiled even where its `include` or `exclude` would leave them out; the files alone
    otherwise."""
    check = f'command -v tsc >/dev/null 2>&1 || {{ echo "{NO_TSC}"; exit 127; }}; '
    wrapper = {
        "extends": f"{WORKSPACE}/tsconfig.json",
        "compilerOptions": {"noEmit": True},
        "files": [f"{WORKSPACE}/{f}" for f in typescript],
    }
    with_config = (
        f"printf '%s' {shlex.quote(json.dumps(wrapper))} > /tmp/tsconfig.interfaces.json"
        " && tsc --noEmit -p /tmp/tsconfig.interfaces.json"
    )
    names = " ".join(shlex.quote(f) for f in typescript)
    # Decided in the sandbox: a copy-on-write workspace has no files on the host to look at.
    return (
        check
        + f"if [ -f {WORKSPACE}/tsconfig.json ]; then {with_config}; "
        + f"else tsc --noEmit --strict --skipLibCheck {names}; fi"
    )


def _run(
    sandbox: Sandbox,
    worktree: Path,
    image: str | None,
    command: str,
    labels: dict[str, str] | None,
) -> tuple[int, str]:
    from supervisor.gates.run import CACHE_HOMES
    from supervisor.sandbox.docker import RunSpec

    result = sandbox.run(
        RunSpec(
            argv=["sh", "-c", command],
            worktree=worktree,
            image=image,
            network="none",
            writable_layer=True,
            env=CACHE_HOMES,
            timeout=TIMEOUT,
            labels={**(labels or {}), "supervisor.interfaces": "1"},
        )
    )
    return result.exit_code, (result.stdout + result.stderr).strip()


def touched(locked: list[str], changed: list[str]) -> list[str]:
    """The locked interface files among a step's changes."""
    return sorted(set(locked) & set(changed))
