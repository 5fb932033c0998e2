"""`supervisor demo`: the whole pipeline on a throw-away repository, before any API key is needed.

It makes a small git repository, starts the scripted model API server on loopback, and runs a real
`start-task` on it: the real `claude` binary in the real sandbox, real worktrees, the real test
gate with no network, and the real state database. The script makes the first implementation
fail its tests, so the feedback loop is part of what a user sees.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.core import process, trustmap
from supervisor.core.errors import UsageError
from supervisor.core.plural import counted
from supervisor.guard.trust import trust

if TYPE_CHECKING:
    pass

TASK = "Implement add() and multiply() in calc.py so that the tests pass"

CALC_STUB = '''"""A tiny calculator."""


def add(a: int, b: int) -> int:
    raise NotImplementedError


def multiply(a: int, b: int) -> int:
    raise NotImplementedError
'''

CALC_BUGGY = '''"""A tiny calculator."""


def add(a: int, b: int) -> int:
    return a + b


def multiply(a: int, b: int) -> int:
    return a + b
'''

CALC_FIXED = '''"""A tiny calculator."""


def add(a: int, b: int) -> int:
    return a + b


def multiply(a: int, b: int) -> int:
    return a * b
'''

TESTS = """import unittest

from calc import add, multiply


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_multiply(self):
        self.assertEqual(multiply(4, 5), 20)


if __name__ == "__main__":
    unittest.main()
"""

MAKEFILE = "test:\n\tpython3 -m unittest -v\n"


FILES = {
    "calc.py": CALC_STUB,
    "test_calc.py": TESTS,
    "Makefile": MAKEFILE,
    "README.md": "# calc\n\nA tiny calculator used by the supervisor demo.\n",
}
MARKER = "supervisor-demo"
"""A file in the demo repository's .git/ (never committed, never in the way): this directory is
a demo's, so a later `demo --keep` may run there again."""
WRITTEN = "supervisor-demo-config"
"""Beside the marker: the sha256 of the `.supervisor/config.yaml` the demo wrote last, so that a
later run knows the file as its own, or as edited since (then left alone: `check_keep`)."""


def make_demo_repo(path: Path) -> Path:
    """A git repository with a stubbed module, its tests and a Makefile, one commit. In an
    earlier demo's repository, the stub files are put back on `main` (committed if they changed);
    nothing else there is touched."""
    path.mkdir(parents=True, exist_ok=True)
    git = ["git", "-C", str(path), "-c", "user.name=demo", "-c", "user.email=demo@localhost"]
    again = is_demo(path)
    if again:
        process.run([*git, "checkout", "-q", "main"])
    for name, content in FILES.items():
        (path / name).write_text(content)
    if not again:
        process.run([*git, "init", "-q", "-b", "main"])
        (path / ".git" / MARKER).write_text("Made by `supervisor demo`.\n")
    process.run([*git, "add", "--", *FILES])
    staged = process.run([*git, "diff", "--cached", "--quiet"], check=False).returncode
    if staged or not again:
        process.run([*git, "commit", "-q", "-m", "Calculator stub with tests"])
    return path


def is_demo(path: Path) -> bool:
    return (path / ".git" / MARKER).is_file()


def configured_by_demo(repo: Path) -> bool:
    """Whether `repo` is a demo's and its config is still the demo's own: its claude pointed at
    the demo's scripted model API, which runs only while `supervisor demo` does and needs no key
    (the demo sets a placeholder in its own process). `doctor` says so there, rather than fail
    to find a key the demo never needed."""
    config = trustmap.repo_path(repo, trustmap.CONFIG, trustmap.NEEDS_TRUST)
    return is_demo(repo) and config.is_file() and _edited_config(repo) is None


def check_keep(path: Path) -> str | None:
    """Refuse to make the demo where it would overwrite or commit someone's files: `--keep`
    takes a new or empty directory, or an earlier demo's whose work tree is clean (then says
    so: the returned note)."""
    if not path.exists():
        return None
    if not path.is_dir():
        raise UsageError(
            f"--keep {path}: that is a file, not a directory.",
            "Name a new or empty directory, e.g. `supervisor demo --keep ./supervisor-demo`.",
        )
    if is_demo(path):
        changed = process.run(
            ["git", "-C", str(path), "status", "--porcelain", "--", ".", ":!.supervisor"],
            check=False,
        ).stdout.strip()
        if changed:
            raise UsageError(
                f"--keep {path} holds an earlier demo with changes of yours "
                f"({counted(len(changed.splitlines()), 'path')} changed or added); the demo "
                "leaves them alone.",
                "Commit or remove them there, or name a new or empty directory.",
            )
        edited = _edited_config(path)
        if edited is not None:
            raise UsageError(
                f"--keep {path} holds an earlier demo whose {edited} was edited since the demo "
                "wrote it; running the demo there would overwrite it with the demo's own (its "
                "scripted model API), so it does nothing.",
                f"Move your edits out of {edited} (or delete it) to run the demo there again, "
                "or name a new or empty directory.",
            )
        return f"{path} holds an earlier demo: running it again there (a new workflow)."
    if any(path.iterdir()):
        raise UsageError(
            f"--keep {path} is not empty and is not an earlier demo's directory; the demo would "
            "overwrite and commit files there, so it does nothing.",
            "Name a new or empty directory, e.g. `supervisor demo --keep ./supervisor-demo`.",
        )
    return None


def _edited_config(repo: Path) -> str | None:
    """The demo's config file, when it is there and not as the demo last wrote it (a demo made
    before the demo recorded it: not as the demo writes it, whatever its API's port)."""
    config = trustmap.repo_path(repo, trustmap.CONFIG, trustmap.NEEDS_TRUST)
    if not config.is_file():
        return None
    text = config.read_text(errors="replace")
    record = repo / ".git" / WRITTEN
    if record.is_file():
        same = record.read_text().strip() == hashlib.sha256(text.encode()).hexdigest()
    else:
        port = re.compile(r"base_url: http://127\.0\.0\.1:\d+\n")
        same = port.sub("", text) == port.sub("", config_text("http://127.0.0.1:0"))
    return None if same else str(config.relative_to(repo))


def setup_missing(node_modules: Path) -> list[str]:
    """What the demo needs from `supervisor setup` and does not find: the claude CLI and Repomix
    with its token encoding (the image and Docker are checked as every task checks them)."""
    wanted = {
        "the claude CLI": node_modules / ".bin" / "claude",
        "Repomix": node_modules / ".bin" / "repomix",
        "the token encoding": node_modules / "gpt-tokenizer" / "data",
    }
    return [name for name, where in wanted.items() if not where.exists()]


def fenced(data: dict[str, Any]) -> str:
    return "```json\n" + json.dumps(data, indent=2) + "\n```"


PLAN = {
    "status": "COMPLETE",
    "summary": "Implement the two functions in calc.py; the existing tests cover them.",
    "phases": [
        {
            "id": "p1",
            "description": "Implement the calculator",
            "components": [{"id": "calc", "description": "add and multiply", "files": ["calc.py"]}],
        }
    ],
    "dependencies": [],
    "estimated_components": 1,
    "risks": [],
}


def implementation(summary: str) -> dict[str, Any]:
    return {
        "status": "SUCCESS",
        "summary": summary,
        "files_created": [],
        "files_modified": ["calc.py"],
        "tests_written": [],
        "blockers": [],
    }


APPROVAL = {
    "status": "APPROVED",
    "summary": "Both functions are correct and covered by the tests.",
    "issues": [],
    "suggestions": [],
    "security_concerns": [],
}


def read_turn(path: str) -> dict[str, Any]:
    """Claude Code's Write refuses to overwrite a file it has not read in the same session."""
    return {"tool_use": {"name": "Read", "input": {"file_path": path}}}


ANALYSIS = {
    "complexity": 2,
    "path": "simple",
    "reasons": ["Two small functions in one file; the existing tests say what they must do."],
    "expected_files": ["calc.py"],
    "recommended_components": 1,
}


def demo_script() -> dict[str, Any]:
    """The analyzer (a small fix: the simple path, no planner), a buggy first implementation, a
    fixed second one after the gate's feedback, and an approving review. The planner's answer
    stays for `--depth planned` runs of the same task."""
    return {
        "conversations": [
            {
                "when": "ROLE: analyzer",
                "turns": [{"text": "My verdict.\n" + fenced(ANALYSIS)}],
            },
            {
                "when": "ROLE: planner",
                "turns": [{"text": "Here is the plan.\n" + fenced(PLAN)}],
            },
            {
                "when": "ROLE: implementer",
                "turns": [
                    read_turn("calc.py"),
                    {
                        "tool_use": {
                            "name": "Write",
                            "input": {"file_path": "calc.py", "content": CALC_BUGGY},
                        }
                    },
                    {"text": "Implemented.\n" + fenced(implementation("add and multiply"))},
                ],
            },
            {
                "when": "FEEDBACK FROM THE PREVIOUS ATTEMPT",
                "turns": [
                    read_turn("calc.py"),
                    {
                        "tool_use": {
                            "name": "Write",
                            "input": {"file_path": "calc.py", "content": CALC_FIXED},
                        }
                    },
                    {"text": "Fixed multiply.\n" + fenced(implementation("fixed multiply"))},
                ],
            },
            {
                "when": "ROLE: reviewer",
                "turns": [{"text": "Reviewed.\n" + fenced(APPROVAL)}],
            },
        ]
    }


def write_project_config(repo: Path, base_url: str) -> None:
    """Point the demo repository's claude at the scripted API, and trust that setting (as
    `supervisor trust` would): the supervisor wrote it itself, for a repository it made."""
    config = trustmap.repo_path(repo, trustmap.CONFIG, trustmap.NEEDS_TRUST)
    config.parent.mkdir(parents=True, exist_ok=True)
    text = config_text(base_url)
    config.write_text(text)
    (repo / ".git" / WRITTEN).write_text(hashlib.sha256(text.encode()).hexdigest() + "\n")
    trust(repo)


def config_text(base_url: str) -> str:
    return (
        "# Written by `supervisor demo`: the model API is the local scripted server.\n"
        "gates:\n  test: make test\n"
        f"clis:\n  claude:\n    base_url: {base_url}\n"  # last: tests append more CLIs to it
    )
