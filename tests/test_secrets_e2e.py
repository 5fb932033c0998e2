"""No secret leaves through the supervisor: a repository seeded with one real-format example of
every kind (in its files, in the task text and in the output of a failing test) runs through a
whole workflow with each real CLI (claude, codex, gemini) in the real sandbox, and no value reaches
the model API, the state database or anything under `.supervisor/`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import (
    BAD_CALC,
    GOOD_CALC,
    implementer,
    new_repo,
    planner,
    require_sandbox,
    reviewer,
    write_workflow,
)
from secret_samples import SAMPLES

from supervisor.core import process
from supervisor.lifecycle import tasks

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.docker

LINES = [line for _, line, _ in SAMPLES.values()]
SECRETS = {name: secret for name, (_, _, secret) in SAMPLES.items()}
# Files that exist to hold credentials: never packed, whatever they hold.
SECRET_FILES = [".envrc", "infra/prod.tfvars", ".docker/config.json", "deploy/credentials.yaml"]
SECRET_FILES += ["kubeconfig", "keys/id_ed25519"]

NOTES = "\n".join(LINES)
# The tests print every secret when multiply is wrong: the gate's output carries them all.
LEAKY_TESTS = f"""import unittest

from calc import add, multiply

DEPLOY_NOTES = {NOTES!r}


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_multiply(self):
        self.assertEqual(multiply(4, 5), 20, msg=DEPLOY_NOTES)


if __name__ == "__main__":
    unittest.main()
"""

SETTINGS = '"""Operations notes, kept next to the code."""\n\nNOTES = """\n{}\n"""\n'


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def seed(repo: Path) -> None:
    files = {"test_calc.py": LEAKY_TESTS, "settings.py": SETTINGS.format("\n".join(LINES))}
    for rel in SECRET_FILES:
        files[rel] = "\n".join(LINES) + "\n"
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@localhost"]
    process.run([*git, "add", "-A"])
    process.run([*git, "commit", "-q", "-m", "Deployment notes"])


def leaks(data: str | bytes) -> list[str]:
    """The names of the samples whose value appears in `data`."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return [name for name, secret in SECRETS.items() if secret in text]


@pytest.mark.parametrize("cli", ["claude", "codex", "gemini"])
def test_no_secret_reaches_the_model_api_the_state_database_or_the_state_dir(
    tmp_path: Path, serve: Any, cli: str
) -> None:
    server = serve(
        planner(),
        implementer(BAD_CALC),
        implementer(GOOD_CALC, when="FEEDBACK FROM THE PREVIOUS ATTEMPT"),
        reviewer(),
    )
    clis = f"  codex: {{base_url: '{server.url}/v1'}}\n  gemini: {{base_url: '{server.url}'}}\n"
    repo = new_repo(tmp_path, server.url, clis, cli="claude")
    seed(repo)
    write_workflow(
        repo,
        "workflow:\n  initial_step: plan\n  steps:\n"
        "    plan: {role: planner, next: implement}\n"
        "    implement: {role: implementer, next: test}\n"
        "    test: {gate: test, next: review, on_fail: implement}\n"
        "    review: {role: reviewer, next: commit}\n"
        "    commit: {action: commit}\n",
    )
    task = "Implement add and multiply in calc.py. Context from the ops channel:\n" + "\n".join(
        LINES
    )

    wf = tasks.start_task(task, repo, cli=cli)

    assert wf.status == "completed"
    # The failing gate's output did reach the retry, as feedback, with its secrets redacted.
    retries = [r for r in server.requests if "FEEDBACK FROM THE PREVIOUS ATTEMPT" in str(r.body)]
    assert retries and "test_multiply" in str(retries[0].body)
    assert "[REDACTED:" in str(retries[0].body)
    for request in server.requests:
        sent = json.dumps(request.body, ensure_ascii=False) + request.path
        sent += json.dumps(request.headers)
        assert leaks(sent) == [], f"secrets sent to the model API: {leaks(sent)}"
    with tasks.reading(repo) as store:
        events = store.events(wf.id)
        gates = [e for e in events if e.type == "gate"]
        assert [e.status for e in gates] == ["failed", "passed"]
        assert "[REDACTED:" in gates[0].payload["output_tail"]
        packed = [e.payload for e in events if e.type == "context_packed"]
        # Counts per kind, never values: every kind is counted where files or feedback held it.
        counted = {kind for p in packed for kind in p["redactions"]}
        assert {kind for kind, _, _ in SAMPLES.values()} <= counted, [p["files"] for p in packed]
        assert all(set(SECRET_FILES) <= set(p["excluded_secret_files"]) for p in packed)
        assert not any(f in SECRET_FILES for p in packed for f in p["files"])
    stored = sorted(p for p in (repo / ".supervisor").rglob("*") if p.is_file())
    assert repo / ".supervisor" / "state.db" in stored
    for path in stored:
        assert leaks(path.read_bytes()) == [], f"secrets in {path}: {leaks(path.read_bytes())}"
