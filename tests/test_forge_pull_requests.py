"""`complete-task --pr`: a finished task's gated commit pushed to a real bare git remote and a
pull request (GitHub) or merge request (GitLab) opened through the real client library
(PyGithub, python-gitlab) against a scripted forge on 127.0.0.1 (tests/forge_standin.py); the
task itself runs in the real engine with the stand-in sandbox (tests/test_engine_fast.py)."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Any

import pytest
import test_engine_fast
from forge_standin import GitHubStandin, GitLabStandin, Repo
from test_engine_fast import Project, writes

from supervisor.core.errors import ApprovalRequired, ConfigError, StateError
from supervisor.forge.base import ForgeAuthError, ForgeError
from supervisor.lifecycle import task_state
from supervisor.lifecycle.pull_request import open_pull_request
from supervisor.sandbox.standin import answer

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

project = test_engine_fast.project
warm_packer = test_engine_fast.warm_packer

TOKEN = "ghp_standinTOKEN0123456789abcdefABCDEF0123"
WORKFLOW = """implement
  steps:
    implement: {role: implementer, next: test, max_retries: 3}
    test: {gate: test, next: review, on_fail: implement}
    review: {role: reviewer, next: commit, on_reject: implement, human_approval: true}
    commit: {action: commit}
"""
CONCERN = {"severity": "minor", "file": "answer.txt", "description": "say <b>why</b> @octocat"}


def reviewed(call: Any) -> str:
    return answer({"status": "APPROVED", "summary": "fine", "issues": [CONCERN]})


def finished(project: Callable[..., Project]) -> Project:
    """A completed task whose review a person approved."""
    p = project(
        WORKFLOW,
        {"test": "grep -q right answer.txt"},
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
        ("ROLE: reviewer", reviewed),
    )
    with pytest.raises(ApprovalRequired):
        p.start()
    task_state.decide(1, p.root, approve=True, approver="ana@example.com")
    assert p.resume().status == "completed"
    return p


def remote(p: Project, tmp_path: Path, url: str) -> Path:
    """`origin` named as on the forge, and pushed to a bare repository here (git's insteadOf:
    the configured URL names the repository, the rewritten one is where git pushes)."""
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    p.git("remote", "add", "origin", url)
    p.git("config", f"url.{bare}.insteadOf", url)
    return bare


def user_config(tmp_path: Path, text: str) -> None:
    (tmp_path / "user").mkdir(exist_ok=True)
    (tmp_path / "user" / "config.yaml").write_text(text)


def remote_tip(bare: Path, branch: str) -> str:
    done = subprocess.run(
        ["git", "--git-dir", str(bare), "rev-parse", f"refs/heads/{branch}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


@pytest.fixture
def github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("GH_TOKEN", TOKEN)
    with GitHubStandin(TOKEN, Repo("acme/widgets")) as forge:
        user_config(tmp_path, f"forge:\n  api_url: {forge.api_url}\n")
        yield forge


def test_a_finished_task_becomes_one_github_pull_request_with_its_story_and_a_rerun_updates_it(
    project: Callable[..., Project], tmp_path: Path, github: GitHubStandin
) -> None:
    p = finished(project)
    bare = remote(p, tmp_path, "https://github.example/acme/widgets.git")
    wf = p.workflow()

    opened = open_pull_request(1, p.root, forge="github", draft=True)

    assert opened.request.created and opened.request.number == 1
    assert remote_tip(bare, wf.task_branch) == p.git("rev-parse", wf.task_branch).strip()
    (pr,) = github.repos["acme/widgets"].pulls
    assert pr["head"]["ref"] == wf.task_branch and pr["base"]["ref"] == wf.base_branch
    assert pr["draft"] is True and pr["title"] == test_engine_fast.TASK
    body = pr["body"]
    assert test_engine_fast.TASK in body
    assert "grep -q right answer.txt" in body and "| passed |" in body  # the gate and its result
    assert "APPROVED" in body and "say <b>why</b> @octocat" in body  # the review's concern...
    assert "` say <b>why</b> @octocat`" not in body.replace("[minor] answer.txt ", "")  # ...in code
    assert "approved by ` ana@example.com `" in body
    assert "tokens" in body and "$" in body
    (event,) = p.events("pull_request")
    assert event.status == "opened" and event.payload["number"] == 1

    again = open_pull_request(1, p.root, forge="github")

    assert not again.request.created and again.request.number == 1
    assert len(github.repos["acme/widgets"].pulls) == 1  # updated, not a second one
    assert [e.status for e in p.events("pull_request")] == ["opened", "updated"]
    assert all(s.authorized for s in github.seen)


def test_a_branch_moved_after_its_gates_is_refused_and_nothing_is_pushed(
    project: Callable[..., Project], tmp_path: Path, github: GitHubStandin
) -> None:
    p = finished(project)
    bare = remote(p, tmp_path, "https://github.example/acme/widgets.git")
    wf = p.workflow()
    p.git("checkout", "-q", wf.task_branch)
    (p.root / "answer.txt").write_text("ungated\n")
    p.git("commit", "-qam", "a change no gate saw")

    with pytest.raises(StateError, match="not the commit its gates passed"):
        open_pull_request(1, p.root, forge="github")

    assert not (bare / "refs" / "heads").exists() or not any((bare / "refs" / "heads").iterdir())
    assert github.seen == [] and p.events("pull_request") == []


def test_gitlab_gets_one_merge_request_updated_on_a_rerun(
    project: Callable[..., Project], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "glpat-standinTOKEN0123456789"
    monkeypatch.setenv("GITLAB_TOKEN", token)
    with GitLabStandin(token, Repo("acme/tools/widgets")) as forge:
        user_config(tmp_path, f"forge:\n  api_url: {forge.api_url}\n")
        p = finished(project)
        remote(p, tmp_path, "git@gitlab.example:acme/tools/widgets.git")  # detected: gitlab

        first = open_pull_request(1, p.root, draft=True)
        second = open_pull_request(1, p.root)

    assert first.noun == "merge request" and first.target.kind == "gitlab"
    assert first.request.created and not second.request.created
    (mr,) = forge.repos["acme/tools/widgets"].pulls
    assert mr["title"].startswith("Draft: ") and "grep -q right answer.txt" in mr["description"]
    assert [s.method for s in forge.seen].count("POST") == 1
    assert all(s.authorized for s in forge.seen)


def test_a_wrong_token_an_unknown_repository_and_an_unknown_forge_say_what_to_fix(
    project: Callable[..., Project], tmp_path: Path, github: GitHubStandin,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    p = finished(project)
    remote(p, tmp_path, "https://github.example/acme/widgets.git")
    monkeypatch.setenv("GH_TOKEN", "ghp_wrong")
    with pytest.raises(ForgeAuthError, match="refused the token") as refused:
        open_pull_request(1, p.root, forge="github")
    assert "ghp_wrong" not in refused.value.message + refused.value.hint
    monkeypatch.setenv("GH_TOKEN", TOKEN)
    p.git("remote", "set-url", "origin", "https://github.example/acme/gadgets.git")
    with pytest.raises(ForgeError, match="has no acme/gadgets"):
        open_pull_request(1, p.root, forge="github")
    p.git("remote", "set-url", "origin", "https://code.example/acme/widgets.git")
    with pytest.raises(ConfigError, match=r"code\.example runs is not known") as unknown:
        open_pull_request(1, p.root)
    assert "--forge github" in unknown.value.hint
    monkeypatch.delenv("GH_TOKEN")
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no `gh` login to fall back on
    with pytest.raises(ForgeAuthError, match="GH_TOKEN"):
        open_pull_request(1, p.root, forge="github")


def test_a_repository_cannot_send_the_token_to_an_api_of_its_choosing_without_trust(
    project: Callable[..., Project], tmp_path: Path, github: GitHubStandin
) -> None:
    p = finished(project)
    remote(p, tmp_path, "https://github.example/acme/widgets.git")
    config = p.root / ".supervisor" / "config.yaml"
    config.write_text(config.read_text() + "forge:\n  api_url: http://127.0.0.1:9/collect\n")

    with pytest.raises(ConfigError, match="trust"):
        open_pull_request(1, p.root, forge="github")

    assert github.seen == []
