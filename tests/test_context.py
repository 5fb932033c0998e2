"""Context packing through the real Repomix: strategies, token budgets, pruning, redaction."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

from supervisor.context import prompts, tokens
from supervisor.context.assemble import build_pack
from supervisor.context.roles import Role, RoleContext
from supervisor.core.errors import ConfigError
from supervisor.guard.trust import trust
from supervisor.project.imports import resolve_imports

if TYPE_CHECKING:
    from pathlib import Path

SECRETS = {
    "aws_access_key_id": "AKIAIOSFODNN7EXAMPLE",
    "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "openai_key": "sk-proj-Zq8r2LmX9vT4kP7wYb3NcD5e",
    "anthropic_key": "sk-ant-api03-Zq8r2LmX9vT4kP7wYb3NcD5e",
    "github_token": "ghp_Zq8r2LmX9vT4kP7wYb3NcD5eFg6HjK1LmN0p",
    "slack_token": "xoxb-2741236540-Zq8r2LmX9vT4",
    "private_key": "MIIEowIBAAKCAQEAzq8r2LmX9vT4kP7wYb3N",
    "url_password": "Sup3rS3cretPw",
    "high_entropy_secret": "q8Zr2LmX9vT4kP7wYb3NcD5e",
}

LEAKY_MODULE = f'''"""Settings with secrets planted for the test."""
AWS_KEY_ID = "{SECRETS["aws_access_key_id"]}"
aws_secret_access_key = "{SECRETS["aws_secret_access_key"]}"
OPENAI = "{SECRETS["openai_key"]}"
ANTHROPIC = "{SECRETS["anthropic_key"]}"
GH = "{SECRETS["github_token"]}"
SLACK = "{SECRETS["slack_token"]}"
DATABASE_URL = "postgres://app:{SECRETS["url_password"]}@db:5432/app"
API_TOKEN = "{SECRETS["high_entropy_secret"]}"
KEY = """-----BEGIN RSA PRIVATE KEY-----
{SECRETS["private_key"]}
-----END RSA PRIVATE KEY-----"""
'''


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    root = tmp_path / "repo"
    (root / "app").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "web").mkdir()
    (root / "app" / "__init__.py").write_text("")
    (root / "app" / "main.py").write_text(
        "from app.util import helper\nfrom . import settings\n\n\ndef run():\n    return helper()\n"
    )
    (root / "app" / "util.py").write_text("def helper():\n    return 1\n" + "# pad\n" * 400)
    (root / "app" / "settings.py").write_text(LEAKY_MODULE)
    (root / "tests" / "test_main.py").write_text("from app.main import run\n" + "# t\n" * 300)
    (root / "web" / "app.ts").write_text("import { x } from './lib';\nexport const y = x;\n")
    (root / "web" / "lib.ts").write_text("export const x = 1;\n")
    (root / ".env").write_text(f"OPENAI_API_KEY={SECRETS['openai_key']}\n")
    (root / "README.md").write_text("# app\n" + "Some words.\n" * 200)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


def role(budget: int, strategy: str = "implementer_targeted", **context: object) -> Role:
    return Role(
        name="implementer",
        model="m",
        template="implement.j2",
        output="implementation",
        context=RoleContext(strategy=strategy, token_budget=budget, **context),  # type: ignore[arg-type]
    )


def test_targets_bring_their_python_and_typescript_imports(repo: Path) -> None:
    files = {"app/__init__.py", "app/main.py", "app/util.py", "app/settings.py", "web/lib.ts"}
    assert resolve_imports(repo, "app/main.py", files) == [
        "app/util.py",
        "app/__init__.py",  # `from . import settings` imports the package first
        "app/settings.py",
    ]
    assert resolve_imports(repo, "web/app.ts", files) == ["web/lib.ts"]


def test_a_generous_budget_packs_every_section_in_priority_order(repo: Path) -> None:
    pack = build_pack(
        repo, role(50_000), repo=repo, prompt_tokens=100, targets=["app/main.py"], diff="+x\n"
    )
    packed = set(pack.files) | set(pack.dropped_by_repomix)
    assert {"app/main.py", "app/util.py", "app/settings.py"} <= packed  # target and imports
    assert "tests/test_main.py" in packed  # related: the target's tests
    assert "README.md" not in packed
    assert pack.pruned == []
    assert "<git_diff>" in pack.text and "<file_tree>" in pack.text
    assert pack.tokens == tokens.count(pack.text)
    assert pack.prompt_tokens + pack.tokens <= pack.budget


def test_a_tight_budget_prunes_lowest_priority_first(repo: Path) -> None:
    full = build_pack(
        repo, role(50_000), repo=repo, prompt_tokens=100, targets=["app/main.py"], diff="+x\n"
    )
    tight = full.tokens + 100 - 700  # room for everything but the tree and the tests
    pack = build_pack(
        repo, role(tight), repo=repo, prompt_tokens=100, targets=["app/main.py"], diff="+x\n"
    )
    sections = [p["section"] for p in pack.pruned]
    assert sections[0] == "tree"  # the lowest priority goes first
    assert "target" not in sections and "imports" not in sections
    assert "app/main.py" in pack.files
    assert pack.prompt_tokens + pack.tokens <= pack.budget
    order = ["target", "imports", "diff", "related", "tree"]
    assert [order.index(s) for s in sections] == sorted(
        (order.index(s) for s in sections), reverse=True
    )


def test_planted_secrets_of_every_kind_never_reach_the_prompt(repo: Path) -> None:
    prompt, pack = prompts.compose(
        role(50_000),
        repo,
        repo,
        task="Rotate the keys",
        feedback=[],
        plan="",
        targets=["app/settings.py"],
        diff=f"+TOKEN_FROM_DIFF = '{SECRETS['github_token']}'\n",
    )
    # Repomix's own scan may drop the file; either way it is accounted for, never silently lost.
    assert "app/settings.py" in pack.files + pack.dropped_by_repomix
    for kind, secret in SECRETS.items():
        assert secret not in prompt, kind
    assert ".env" in pack.excluded_secret_files
    assert pack.redactions.get("github_token")  # the diff's secret, redacted by the supervisor
    assert all(secret not in str(pack.summary()) for secret in SECRETS.values())


def test_the_task_feedback_and_plan_are_redacted_and_counted_in_the_prompt(repo: Path) -> None:
    prompt, pack = prompts.compose(
        role(50_000),
        repo,
        repo,
        task=f"Deploy with GH_TOKEN={SECRETS['github_token']}",
        feedback=[f"FAILED test_db: could not connect as {SECRETS['slack_token']}"],
        plan=f'{{"notes": "AWS key {SECRETS["aws_access_key_id"]}"}}',
        targets=["app/main.py"],
        diff="",
    )
    for kind in ("github_token", "slack_token", "aws_access_key_id"):
        assert SECRETS[kind] not in prompt
        assert f"[REDACTED:{kind}]" in prompt
        assert pack.redactions[kind] >= 1
    assert "FAILED test_db: could not connect as" in prompt  # the rest of the feedback stays


def test_a_budget_too_small_for_the_task_itself_is_refused(repo: Path) -> None:
    with pytest.raises(ConfigError, match="leaving nothing for context") as info:
        build_pack(repo, role(50), repo=repo, prompt_tokens=400, targets=[])
    assert "token_budget" in info.value.hint


def test_an_unknown_strategy_is_named(repo: Path) -> None:
    with pytest.raises(ConfigError, match="Unknown context strategy 'telepathy'"):
        build_pack(repo, role(5000, strategy="telepathy"), repo=repo, prompt_tokens=10)


def test_a_project_template_with_an_undefined_variable_is_an_error(repo: Path) -> None:
    templates = repo / ".supervisor" / "templates"
    templates.mkdir(parents=True)
    (templates / "implement.j2").write_text("{{ task }} {{ no_such_thing }}")
    trust(repo)  # an untrusted one would not be used at all
    with pytest.raises(ConfigError, match="no_such_thing"):
        prompts.compose(role(5000), repo, repo, task="t", feedback=[], plan="", targets=[], diff="")


def test_every_built_in_strategy_packs(repo: Path) -> None:
    for strategy in [
        "planner_docset",
        "implementer_targeted",
        "reviewer_diff",
        "security_audit",
        "investigator_wide",
    ]:
        pack = build_pack(
            repo,
            role(100_000, strategy=strategy),
            repo=repo,
            prompt_tokens=10,
            targets=["app/main.py"],
            diff="+x\n",
        )
        assert pack.files or "<git_diff>" in pack.text, strategy
        assert ".env" not in pack.files
