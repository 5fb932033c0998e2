"""Project sandbox images on the real engine: dependencies installed at build time (with network),
gates offline with the project's own toolchain, rebuilt exactly when dependency files change."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import fenced, implementation, remove_project_images, require_sandbox, reviewer

from supervisor.core.errors import SandboxError
from supervisor.fakeapi import ScriptedModelServer, load_script
from supervisor.gates.run import run_gate
from supervisor.guard.trust import trust
from supervisor.lifecycle import image_commands, tasks
from supervisor.sandbox.docker import DockerSandbox

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.docker
IMAGE = "supervisor-sandbox:latest"

DATES = (
    "from datetime import date\n\nfrom dateutil.relativedelta import relativedelta\n\n\n"
    "def next_month(d: date) -> date:\n    return d + relativedelta(months=1)\n"
)
DATES_TEST = (
    "from datetime import date\n\nfrom app.dates import next_month\n\n\n"
    "def test_next_month():\n    assert next_month(date(2024, 1, 31)) == date(2024, 2, 29)\n"
)
NODE_TEST = (
    "const assert = require('assert');\nconst isNumber = require('is-number');\n"
    "assert.strictEqual(isNumber(5), true);\nassert.strictEqual(isNumber('x'), false);\n"
    "console.log('node tests passed');\n"
)


@pytest.fixture(autouse=True)
def real_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    require_sandbox()
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    yield
    # Remove the project images this test built (Docker's layer cache keeps later builds fast).
    remove_project_images(tmp_path)


def git_repo(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    commit(root, "project")
    return root


def commit(root: Path, message: str) -> None:
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(root),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            message,
        ],
        check=True,
    )


def python_project(root: Path) -> Path:
    return git_repo(
        root,
        {
            "requirements.txt": "python-dateutil==2.9.0.post0\n",
            "app/__init__.py": "",
            "app/dates.py": DATES,
            "tests/test_dates.py": DATES_TEST,
        },
    )


@pytest.fixture
def sandbox() -> Iterator[DockerSandbox]:
    box = DockerSandbox(IMAGE, "supervisor-egress-test")
    yield box
    box.close()


def gate(sandbox: DockerSandbox, repo: Path, command: str, image: str) -> Any:
    from supervisor.core.config import Limits

    return run_gate(sandbox, "test", command, repo, Limits(), {"supervisor.test": "1"}, image=image)


def test_a_python_project_with_a_pypi_dependency_passes_its_gate_offline(
    tmp_path: Path, sandbox: DockerSandbox
) -> None:
    repo = python_project(tmp_path / "py")
    path, written = image_commands.sandbox_init(repo)
    assert written and "FROM supervisor-sandbox:latest" in path.read_text()
    tag, seconds = image_commands.sandbox_build(repo)
    assert seconds is not None  # built
    assert image_commands.sandbox_build(repo) == (tag, None)  # unchanged: reused, no rebuild
    result = gate(sandbox, repo, "python3 -m pytest -q -p no:cacheprovider", tag)
    assert result.passed, result.output
    assert "1 passed" in result.output
    offline = gate(
        sandbox,
        repo,
        "python3 -c \"import urllib.request; urllib.request.urlopen('https://pypi.org', "
        'timeout=5)"',
        tag,
    )
    assert not offline.passed  # the gate sandbox has no network at all


def test_a_node_project_with_an_npm_dependency_passes_its_gate_offline(
    tmp_path: Path, sandbox: DockerSandbox
) -> None:
    package = {
        "name": "p",
        "version": "1.0.0",
        "scripts": {"test": "node test.js"},
        "dependencies": {"is-number": "7.0.0"},
    }
    repo = git_repo(tmp_path / "node", {"package.json": json.dumps(package), "test.js": NODE_TEST})
    image_commands.sandbox_init(repo)
    tag, _ = image_commands.sandbox_build(repo)
    result = gate(sandbox, repo, "npm test", tag)
    assert result.passed, result.output
    assert "node tests passed" in result.output


def test_a_dependency_that_cannot_install_is_a_clear_error_and_nothing_starts(
    tmp_path: Path,
) -> None:
    repo = python_project(tmp_path / "py")
    (repo / "requirements.txt").write_text("no-such-package-supervisor-test==9.9.9\n")
    commit(repo, "bad dependency")
    image_commands.sandbox_init(repo)
    (repo / ".supervisor" / "config.yaml").write_text("gates: {test: python3 -m pytest -q}\n")
    with pytest.raises(SandboxError, match="Building the project sandbox image failed") as info:
        tasks.start_task("anything", repo)
    assert "no-such-package-supervisor-test" in info.value.message  # the build log's lines
    assert "supervisor sandbox build" in info.value.hint
    assert tasks.workflows(repo) == []
    branches = subprocess.run(
        ["git", "-C", str(repo), "branch", "--list", "ai/*"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert branches == ""


def test_a_broken_dockerfile_names_the_file(tmp_path: Path) -> None:
    repo = python_project(tmp_path / "py")
    path, _ = image_commands.sandbox_init(repo)
    path.write_text(path.read_text() + "\nRUN exit 3\n")  # the user's edit broke it
    _, written = image_commands.sandbox_init(repo)
    assert not written  # an edited file is never overwritten
    trust(repo)  # the user trusts their own edit (an untrusted one is never built)
    with pytest.raises(SandboxError) as info:
        image_commands.sandbox_build(repo)
    assert str(path) in info.value.hint


def test_an_unknown_stack_asks_for_a_dockerfile(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "docs", {"README.md": "# only words\n"})
    with pytest.raises(SandboxError, match="No known stack") as info:
        image_commands.sandbox_init(repo)
    assert "FROM supervisor-sandbox:latest" in info.value.hint


def test_a_task_that_edits_the_dependencies_rebuilds_once_before_its_gate(
    tmp_path: Path,
) -> None:
    repo = python_project(tmp_path / "py")
    (repo / "app" / "dates.py").write_text("raise NotImplementedError\n")
    commit(repo, "stub")
    subprocess.run(
        [sys.executable, "-m", "supervisor", "init", "--yes", "--repo", str(repo)],
        check=True,
        capture_output=True,
    )
    image_commands.sandbox_build(repo)
    requirements = "python-dateutil==2.9.0.post0\nsix==1.16.0\n"
    worker = {
        "when": "ROLE: implementer",
        "turns": [
            {"tool_use": {"name": "Read", "input": {"file_path": "app/dates.py"}}},
            {
                "tool_use": {
                    "name": "Write",
                    "input": {"file_path": "app/dates.py", "content": DATES},
                }
            },
            {"tool_use": {"name": "Read", "input": {"file_path": "requirements.txt"}}},
            {
                "tool_use": {
                    "name": "Write",
                    "input": {"file_path": "requirements.txt", "content": requirements},
                }
            },
            {"text": fenced(implementation("dates"))},
        ],
    }
    script = load_script({"conversations": [worker, reviewer()]})
    with ScriptedModelServer(script) as server:
        config = repo / ".supervisor" / "config.yaml"
        config.write_text(
            config.read_text()
            + f"clis:\n  claude: {{base_url: '{server.url}'}}\n"
            + "sandbox: {dependency_changes: allow}\n"  # pre-approved (test_attacks_harness)
        )
        trust(repo)
        (repo / ".supervisor" / "workflow.yaml").write_text(
            "workflow:\n  initial_step: implement\n  steps:\n"
            "    implement: {role: implementer, next: test}\n"
            "    test: {gate: test, next: review, on_fail: implement}\n"
            "    review: {role: reviewer, next: commit}\n"
            "    commit: {action: commit}\n"
        )
        wf = tasks.start_task("Implement next_month", repo)
    assert wf.status == "completed"
    with tasks.reading(repo) as store:
        rebuilt = [e for e in store.events(wf.id) if e.type == "sandbox_rebuilt"]
        gates = [e for e in store.events(wf.id) if e.type == "gate"]
    assert len(rebuilt) == 1  # exactly one rebuild, for the changed requirements.txt
    assert "requirements.txt" in rebuilt[0].payload["reason"]
    assert rebuilt[0].step == "test"  # built by the supervisor before the gate, not in it
    assert [g.status for g in gates] == ["passed"]
    assert "1 passed" in gates[0].payload["output_tail"]
