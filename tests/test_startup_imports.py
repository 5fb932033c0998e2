"""Every `supervisor` process pays for what it imports, and the test suite starts hundreds: the
budget of what the common paths load, checked in a fresh interpreter.

- The checks before a task exists (supervisor/lifecycle/starting.py: what a submission to Temporal
and an
  embedded start both run first, a secret in the description redacted) load neither
  detect-secrets nor `requests` (its rules come from the user's cache,
  supervisor/core/redaction.py), nor tiktoken, Temporal's client, Docker, Jinja2, networkx, the
  engine or the credential proxy (h11: a credential is made at a task's first step).
- Importing the submission module loads no Temporal SDK: a helper process imports it while the
  checks run (supervisor/temporal/link.py); a whole submission's budget, the same list, is
  checked on a real server in tests/test_temporal_submit.py.
- `status` and `events --json` load none of Temporal, detect-secrets or tiktoken (the rest of
  their budget is tests/test_cli_imports.py).

What it costs in seconds: benchmarks/cli_speed.py, benchmarks/scaleout.py --submission-only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from e2e_support import new_repo
from test_cli_imports import modules_after
from test_cli_imports import repo as repo  # the module-scoped fixture: a state with workflows

from supervisor.core import redaction

if TYPE_CHECKING:
    from pathlib import Path

HEAVY = (
    "detect_secrets", "requests", "tiktoken", "temporalio", "docker", "jinja2", "networkx",
    "textual", "h11", "supervisor.workflow.engine", "supervisor.lifecycle.tasks",
)  # fmt: skip

PREPARE = """
import json, sys
from pathlib import Path
out, repo, description = sys.argv[1:4]
import supervisor.temporal.submit
from supervisor.lifecycle import starting
from supervisor.lifecycle.opening import open_project
task = starting.prepare(description, open_project(Path(repo)))
with open(out, "w") as handle:
    json.dump({"description": task.description, "modules": sorted(sys.modules)}, handle)
"""


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY)


def test_the_checks_before_a_task_exists_load_no_scanner_tokenizer_temporal_or_engine(
    tmp_path: Path, api_keys: None
) -> None:
    repo_path = new_repo(tmp_path, "http://127.0.0.1:9")
    redaction.detect_secrets_rules()  # the cache a first run writes (this checkout's)
    out = tmp_path / "prepared.json"
    description = "Add multiply; the staging key is glpat-abcdefghijklmnopqrst"
    done = subprocess.run(
        [sys.executable, "-c", PREPARE, str(out), str(repo_path), description],
        capture_output=True, text=True, timeout=120, check=False, env=os.environ,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert "[REDACTED:gitlab_token]" in result["description"]  # it did redact
    assert heavy(set(result["modules"])) == []


@pytest.mark.parametrize(
    "args", [["status", "1"], ["status"], ["events", "1", "--json"]], ids=["id", "list", "events"]
)
def test_reading_commands_load_no_temporal_scanner_or_tokenizer(
    repo: Path, tmp_path: Path, args: list[str]
) -> None:
    modules = modules_after(repo, tmp_path, *args)
    assert "supervisor.state.reader" in modules
    assert heavy(modules) == []
