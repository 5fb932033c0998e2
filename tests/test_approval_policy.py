"""The approval policy as pure logic: the shipped default, a project's override, a bad file, and
the facts it judges (public API changes read with ast, gates fixed, reviewers' concerns)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest

from supervisor.core.errors import ConfigError
from supervisor.guard.trust import trust
from supervisor.policy import approval_policy, risk
from supervisor.policy.approval_policy import Facts, FileChange, evaluate, parse

if TYPE_CHECKING:
    from supervisor.policy.approval_policy import Policy


@pytest.fixture
def default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Policy:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    return approval_policy.load(None)


def files(*paths: str, lines: int = 5) -> Facts:
    return Facts(files=[FileChange(p, lines, 0) for p in paths])


def test_a_change_to_auth_code_requires_one_approval_and_says_which_path(default: Policy) -> None:
    decision = evaluate(default, files("src/auth/session.py"))

    assert (decision.level, decision.action) == ("high", "require_approval")
    assert decision.stops
    assert decision.reasons == ["sensitive paths: auth (src/auth/session.py)"]


@pytest.mark.parametrize(
    "path", ["billing/invoice.py", "app/payments/stripe_client.py", "deploy/keys/server.pem"]
)
def test_payment_and_key_management_code_require_approval_too(default: Policy, path: str) -> None:
    assert evaluate(default, files(path)).action == "require_approval"


def test_under_three_files_with_no_sensitive_path_is_approved_automatically(
    default: Policy,
) -> None:
    decision = evaluate(default, files("calc.py", "test_calc.py"))

    assert (decision.level, decision.action) == ("low", "auto_approve")
    assert not decision.stops


def test_more_than_twenty_files_require_approval_wherever_they_are(default: Policy) -> None:
    decision = evaluate(default, files(*(f"src/m{i}.py" for i in range(21))))

    assert decision.action == "require_approval"
    assert decision.reasons == ["21 files changed (over 20)"]


def test_a_big_change_to_auth_code_is_critical_and_needs_two_distinct_approvers(
    default: Policy,
) -> None:
    decision = evaluate(default, files("auth/login.py", *(f"src/m{i}.py" for i in range(21))))

    assert (decision.level, decision.action, decision.approvers) == (
        "critical",
        "require_multi_approval",
        2,
    )
    assert "22 files changed (over 20)" in decision.reasons


def test_a_medium_change_is_recorded_with_every_reason_and_goes_on(default: Policy) -> None:
    facts = Facts(
        files=[FileChange("requirements.txt", 1, 0), FileChange("old.py", 0, 30, "D")],
        api_changes=["old.py: parse(text) removed"],
        fixed_gates=["test"],
    )
    decision = evaluate(default, facts)

    assert (decision.level, decision.action) == ("medium", "auto_approve")
    assert decision.reasons == [
        "sensitive paths: dependencies (requirements.txt)",
        "1 file deleted: old.py",
        "public API changed: old.py: parse(text) removed",
        "gate(s) failed, then passed: test",
    ]


def test_reviewer_security_concerns_require_approval(default: Policy) -> None:
    facts = Facts(files=[FileChange("calc.py", 2, 0)], security_concerns=["reviewer: eval()"])
    assert evaluate(default, facts).action == "require_approval"


def test_a_project_policy_overrides_one_level_and_keeps_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    repo = tmp_path / "repo"
    (repo / ".supervisor").mkdir(parents=True)
    (repo / ".supervisor" / "approval_policy.yaml").write_text(
        "levels:\n  medium:\n    action: notify_and_timeout\n    timeout_minutes: 15\n"
    )
    untrusted = approval_policy.load(repo)  # it could lower every level: ignored until trusted
    assert str(repo) not in untrusted.source
    trust(repo)

    policy = approval_policy.load(repo)

    decision = evaluate(policy, files("a.py", "b.py", "c.py"))
    assert (decision.level, decision.action, decision.timeout_minutes) == (
        "medium",
        "notify_and_timeout",
        15.0,
    )
    assert evaluate(policy, files("auth/x.py")).action == "require_approval"
    assert str(repo / ".supervisor" / "approval_policy.yaml") in policy.source


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ({"levels": {"urgent": {"action": "auto_approve"}}}, "unknown level 'urgent'"),
        (
            {"levels": {"high": {"action": "require_approval", "when_any": [{"size_over": 3}]}}},
            "unknown condition 'size_over'",
        ),
        (
            {"levels": {"high": {"action": "require_approval", "when_any": [{"sensitive": "db"}]}}},
            "sensitive group 'db' is not defined",
        ),
        ({"levels": {"low": {"action": "approve_maybe"}}}, "unknown action 'approve_maybe'"),
        (
            {"levels": {"high": {"action": "require_multi_approval", "approvers": 1}}},
            "needs approvers: 2 or more",
        ),
        (
            {"levels": {"medium": {"action": "notify_and_timeout"}}},
            "notify_and_timeout needs timeout_minutes > 0",
        ),
    ],
)
def test_a_bad_policy_file_is_refused_naming_what_is_wrong(
    data: dict[str, object], named: str
) -> None:
    with pytest.raises(ConfigError, match=named) as refused:
        parse(data, "my_policy.yaml")
    assert "my_policy.yaml" in refused.value.message
    assert refused.value.hint


def test_a_bad_project_policy_names_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    (tmp_path / ".supervisor").mkdir()
    (tmp_path / ".supervisor" / "approval_policy.yaml").write_text(
        "levels:\n  high:\n    action: require_approval\n    when_any:\n      - lines_ovr: 5\n"
    )
    trust(tmp_path)
    with pytest.raises(ConfigError, match="unknown condition 'lines_ovr'") as refused:
        approval_policy.load(tmp_path)
    assert ".supervisor/approval_policy.yaml" in refused.value.message


# -- the facts -----------------------------------------------------------------------------


BEFORE = """
__version__ = "1"


def login(user, password):
    return True


def _helper(x):
    return x


class Session:
    def refresh(self, token: str) -> None: ...

    def _private(self): ...
"""


def test_a_removed_or_changed_exported_python_symbol_is_a_public_api_change() -> None:
    after = (
        BEFORE.replace("def login(user, password)", "def login(user, password, otp)")
        .replace("    def refresh(self, token: str) -> None: ...\n", "")
        .replace("def _helper(x)", "def _helper(x, y)")
        .replace("def _private(self)", "def _private(self, z)")
    )

    assert risk.api_diff(BEFORE, after, python=True) == [
        "login(user, password) -> login(user, password, otp)",
        "Session.refresh(self, token: str) -> None removed",
    ]
    assert risk.api_diff(BEFORE, BEFORE + "\n\ndef added(): ...\n", python=True) == []


def test_with_dunder_all_only_the_listed_names_are_public() -> None:
    before = "__all__ = ['keep']\n\ndef keep(a): ...\n\ndef other(a): ...\n"
    after = "__all__ = ['keep']\n\ndef keep(a): ...\n\ndef other(a, b): ...\n"
    assert risk.api_diff(before, after, python=True) == []
    assert risk.api_diff(before, after.replace("keep(a)", "keep(b)"), python=True) == [
        "keep(a) -> keep(b)"
    ]


def test_a_removed_or_changed_typescript_export_line_is_a_public_api_change() -> None:
    before = "export function login(user: string): boolean {\n}\nexport const LIMIT = 3;\n"
    after = "export function login(user: string, otp: string): boolean {\n}\nconst LIMIT = 3;\n"

    assert risk.api_diff(before, after, python=False) == [
        "`export function login(user: string): boolean {` removed or changed",
        "`export const LIMIT = 3;` removed or changed",
    ]


def event(kind: str, status: str, step: str = "test", role: str | None = None, **payload: object):
    return SimpleNamespace(type=kind, status=status, step=step, role=role, payload=payload)


def test_a_gate_that_failed_and_passes_now_counts_as_fixed() -> None:
    events = [
        event("gate", "failed"),
        event("gate", "passed", step="lint"),
        event("gate", "passed"),
    ]
    assert risk.fixed_gates(events) == ["test"]
    assert risk.fixed_gates([event("gate", "passed"), event("gate", "failed")]) == []


def test_only_the_latest_review_rounds_security_concerns_count() -> None:
    earlier = {"status": "CHANGES_REQUESTED", "security_concerns": ["SQL built by hand"]}
    latest = {"status": "APPROVED", "security_concerns": ["token logged at debug level"]}
    events = [
        event("review", "CHANGES_REQUESTED", "review", "security-reviewer", output=earlier),
        event("implementation", "succeeded", "implement"),
        event("review", "APPROVED", "review", "security-reviewer", output=latest),
    ]
    assert risk.security_concerns(events) == ["security-reviewer: token logged at debug level"]


def test_an_approving_review_that_lists_security_concerns_is_judged_high(default: Policy) -> None:
    """The review that just approved is one of the facts (EventSpec: not committed yet)."""
    from supervisor.state.store import EventSpec

    said = {"status": "APPROVED", "issues": [], "security_concerns": ["eval() of user input"]}
    review = EventSpec("review", "review", "reviewer", "APPROVED", {"output": said})
    concerns, issues = risk.latest_reviews([event("implementation", "succeeded"), review])
    assert (concerns, issues) == (["reviewer: eval() of user input"], [])
    facts = Facts(files=[FileChange("calc.py", 2, 0)], security_concerns=concerns)
    decision = evaluate(default, facts)
    assert (decision.level, decision.action) == ("high", "require_approval")
    assert decision.reasons == ["reviewer security concerns: reviewer: eval() of user input"]


def test_an_approval_listing_a_major_issue_waits_and_a_minor_one_is_recorded(
    default: Policy,
) -> None:
    def judged(severity: str) -> approval_policy.Decision:
        said = {"status": "APPROVED", "issues": [
            {"severity": severity, "file": "calc.py", "description": "no overflow check"}
        ]}  # fmt: skip
        _, issues = risk.latest_reviews([event("review", "APPROVED", role="r", output=said)])
        assert issues == [f"r: [{severity}] calc.py: no overflow check"]
        return evaluate(default, Facts(files=[FileChange("calc.py", 2, 0)], review_issues=issues))

    major = judged("major")
    assert (major.level, major.action) == ("high", "require_approval")
    assert major.reasons == [
        "review issues (critical, major): r: [major] calc.py: no overflow check"
    ]
    minor = judged("minor")
    assert (minor.level, minor.action) == ("medium", "auto_approve")
    assert minor.reasons == [
        "issues listed by approving reviews: r: [minor] calc.py: no overflow check"
    ]


def test_review_issues_names_known_severities_only() -> None:
    with pytest.raises(ConfigError, match="review_issues lists unknown severities"):
        parse({"levels": {"high": {"action": "require_approval",
                                   "when_any": [{"review_issues": ["severe"]}]}}})  # fmt: skip


def test_a_review_output_of_the_wrong_shape_is_no_fact_and_no_crash() -> None:
    odd = [
        event("review", "APPROVED", role="a", output="not a mapping"),
        event("review", "APPROVED", role="b", output={"issues": "x", "security_concerns": 3}),
        event("review", "APPROVED", role="c", output={"issues": ["plain text"]}),
    ]
    assert risk.latest_reviews(odd) == ([], [])
