"""The risk-based approval policy: which candidates a person must see before they are committed.

A policy is data (config/approval_policy.yaml, overridable per user and project): levels from
critical down to low, each with conditions over the candidate's *facts* (what changed, as git sees
it, plus what the gates and reviewers said) and an action. Evaluation is pure: `evaluate(policy,
facts)` names the level, the action and every condition that fired, in words a person can check.
Gathering the facts from git and the event log lives in supervisor/policy/risk.py.

The file is checked by hand rather than by pydantic so that a typo gets an error naming the very
condition, level or group, and the list of what is allowed there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from supervisor.core import trustmap
from supervisor.core.errors import ConfigError
from supervisor.core.plural import counted

LEVELS = ("critical", "high", "medium", "low")
"""Highest first: the order in which levels are tried."""
ACTIONS = ("auto_approve", "notify_and_timeout", "require_approval", "require_multi_approval")
CONDITIONS = (
    "files_over",
    "lines_over",
    "sensitive",
    "deleted_files_over",
    "public_api_changed",
    "gates_fixed",
    "security_concerns",
    "review_issues",
    "tests_changed",
    "test_tamper_signals",
)
SEVERITIES = ("critical", "major", "minor", "info")
"""A review issue's severities (supervisor/core/schemas.py ReviewIssue)."""
STOPS = ("require_approval", "require_multi_approval")
POLICY_FILE = "approval_policy.yaml"


@dataclass(frozen=True)
class FileChange:
    path: str
    added: int = 0
    deleted: int = 0
    status: str = "M"  # A, M or D, as `git diff --name-status` says


@dataclass
class Facts:
    """What the policy judges: the candidate against the task branch, and the task's history."""

    files: list[FileChange] = field(default_factory=list)
    api_changes: list[str] = field(default_factory=list)
    """One line per removed or changed exported symbol, e.g. `auth/api.py: login(user) removed`."""
    fixed_gates: list[str] = field(default_factory=list)
    security_concerns: list[str] = field(default_factory=list)
    review_issues: list[str] = field(default_factory=list)
    """The latest review round's issues, `reviewer: [severity] file: description`: listed by
    reviews that approved all the same (a rejection sends the work back instead)."""
    spec_changes: list[str] = field(default_factory=list)
    """The base's test files the candidate changed, when the base's tests fail on its code (the
    base oracle, supervisor/gates/base_oracle.py): it changes the specification."""
    tamper_signals: list[str] = field(default_factory=list)
    """Static signals that the candidate weakened existing tests (gates/test_tamper.py)."""

    @property
    def lines(self) -> int:
        return sum(f.added + f.deleted for f in self.files)

    @property
    def deleted(self) -> list[str]:
        return [f.path for f in self.files if f.status == "D"]


@dataclass(frozen=True)
class Level:
    name: str
    action: str
    when_any: tuple[tuple[str, Any], ...] = ()
    when_all: tuple[tuple[str, Any], ...] = ()
    timeout_minutes: float = 0.0
    approvers: int = 1
    approvers_from: tuple[str, ...] = ()


@dataclass(frozen=True)
class Policy:
    groups: dict[str, tuple[str, ...]]
    levels: tuple[Level, ...]  # highest first
    source: str = "approval policy"


@dataclass
class Decision:
    level: str
    action: str
    reasons: list[str]
    timeout_minutes: float = 0.0
    approvers: int = 1
    approvers_from: list[str] = field(default_factory=list)

    @property
    def stops(self) -> bool:
        return self.action in STOPS

    def as_context(self) -> dict[str, Any]:
        """The decision as the workflow's context keeps it (what `approve` and `status` read)."""
        return {
            "level": self.level,
            "action": self.action,
            "reasons": self.reasons,
            "timeout_minutes": self.timeout_minutes,
            "approvers": self.approvers,
            "approvers_from": self.approvers_from,
        }


# -- loading -------------------------------------------------------------------------------


def load(repo: Path | None) -> Policy:
    """The package policy, then the user's, then the project's, merged like config.yaml."""
    from supervisor.core.config import CONFIG_DIR, _mapping, deep_merge, user_dir

    sources = [CONFIG_DIR / POLICY_FILE, user_dir() / POLICY_FILE]
    if repo is not None and _trusted_policy(repo):
        sources.append(trustmap.repo_path(repo, trustmap.POLICY, trustmap.NEEDS_TRUST))
    data: dict[str, Any] = {}
    used = []
    for source in sources:
        if source.is_file():
            data = deep_merge(data, _mapping(source))
            used.append(str(source))
    return parse(data, " < ".join(used) or "approval policy")


def _trusted_policy(repo: Path) -> bool:
    """A repository's policy could lower every level: it counts only as the user trusted it."""
    from supervisor.guard import trust
    from supervisor.guard.reading import read_regular

    path = trustmap.repo_path(repo, trustmap.POLICY, trustmap.NEEDS_TRUST)
    data = read_regular(repo, [trustmap.POLICY]).get(trustmap.POLICY)
    if data is None:
        return False
    if trust.file_trusted(repo, trustmap.POLICY, data):
        return True
    state = "changed since you trusted it" if trust.file_known(repo, trustmap.POLICY) else ""
    trust.warn(
        f"The repository's approval policy {path} is ignored: it is {state or 'not trusted'} "
        f"(the package's and your own apply). Read it, then run `supervisor trust --repo {repo}`."
    )
    return False


def parse(data: dict[str, Any], source: str = "approval policy") -> Policy:
    """Check a policy mapping and turn it into a Policy; a ConfigError names what is wrong."""
    unknown = sorted(set(data) - {"sensitive_paths", "levels"})
    if unknown:
        _bad(
            source, f"unknown key(s) {', '.join(unknown)}", "The keys are sensitive_paths, levels."
        )
    groups: dict[str, tuple[str, ...]] = {}
    for name, globs in (data.get("sensitive_paths") or {}).items():
        if not isinstance(globs, list) or not all(isinstance(g, str) and g for g in globs):
            _bad(source, f"sensitive_paths.{name} is not a list of globs", "Write [glob, ...].")
        groups[str(name)] = tuple(globs)
    levels_data = data.get("levels") or {}
    if not isinstance(levels_data, dict):
        _bad(source, "`levels` is not a mapping", f"Map level names ({', '.join(LEVELS)}).")
    for name in levels_data:
        if name not in LEVELS:
            _bad(source, f"unknown level '{name}'", f"The levels are {', '.join(LEVELS)}.")
    levels = tuple(
        _level(name, levels_data[name] or {}, groups, source)
        for name in LEVELS
        if name in levels_data
    )
    return Policy(groups, levels, source)


def _level(name: str, data: Any, groups: dict[str, tuple[str, ...]], source: str) -> Level:
    where = f"level '{name}'"
    if not isinstance(data, dict):
        _bad(source, f"{where} is not a mapping", "Give it `action:` and conditions.")
    allowed = {"action", "when_any", "when_all", "timeout_minutes", "approvers", "approvers_from"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        _bad(source, f"{where} has unknown key(s) {', '.join(unknown)}", f"Use {sorted(allowed)}.")
    action = data.get("action")
    if action not in ACTIONS:
        _bad(source, f"{where} has unknown action '{action}'", f"Use one of {', '.join(ACTIONS)}.")
    conditions = {}
    for key in ("when_any", "when_all"):
        items = data.get(key) or []
        if not isinstance(items, list):
            _bad(source, f"{where}: {key} is not a list", "Write a list of `- condition: value`.")
        conditions[key] = tuple(_condition(where, item, groups, source) for item in items)
    timeout = data.get("timeout_minutes", 0)
    approvers = data.get("approvers", 2 if action == "require_multi_approval" else 1)
    people = data.get("approvers_from") or []
    if action == "notify_and_timeout" and not (_number(timeout) and timeout > 0):
        _bad(source, f"{where}: notify_and_timeout needs timeout_minutes > 0", "Set it.")
    if action == "require_multi_approval" and not (isinstance(approvers, int) and approvers >= 2):
        _bad(source, f"{where}: require_multi_approval needs approvers: 2 or more", "Set it.")
    if not isinstance(people, list) or not all(isinstance(p, str) for p in people):
        _bad(source, f"{where}: approvers_from is not a list of emails", "Write [a@x, b@y].")
    if people and len(set(people)) < approvers:
        _bad(
            source,
            f"{where} needs {approvers} approvers but approvers_from names {len(set(people))}",
            "Name more approvers or lower `approvers`.",
        )
    return Level(
        name,
        action,
        conditions["when_any"],
        conditions["when_all"],
        float(timeout),
        int(approvers),
        tuple(people),
    )


def _condition(
    where: str, item: Any, groups: dict[str, tuple[str, ...]], source: str
) -> tuple[str, Any]:
    if not isinstance(item, dict) or len(item) != 1:
        _bad(source, f"{where}: condition {item!r} is not one `name: value`", "e.g. files_over: 20")
    ((name, value),) = item.items()
    if name not in CONDITIONS:
        _bad(source, f"{where}: unknown condition '{name}'", f"Use one of {', '.join(CONDITIONS)}.")
    if name == "sensitive":
        names = value if isinstance(value, list) else [value]
        for group in names:
            if group not in groups:
                _bad(
                    source,
                    f"{where}: sensitive group '{group}' is not defined under sensitive_paths",
                    f"Define it, or use one of {', '.join(groups) or '(none defined)'}.",
                )
        return name, tuple(names)
    if name == "review_issues" and isinstance(value, list):
        wrong = [v for v in value if v not in SEVERITIES]
        if wrong or not value:
            _bad(
                source,
                f"{where}: review_issues lists unknown severities {wrong}",
                f"Use true, or a list of {', '.join(SEVERITIES)}.",
            )
        return name, tuple(value)
    if name.endswith("_over"):
        if not (_number(value) and value >= 0):
            _bad(source, f"{where}: {name} needs a number >= 0, not {value!r}", "e.g. 20")
        return name, value
    if not isinstance(value, bool):
        _bad(source, f"{where}: {name} needs true or false, not {value!r}", f"{name}: true")
    return name, value


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _bad(source: str, problem: str, hint: str) -> None:
    raise ConfigError(f"{source}: {problem}.", f"{hint} (see config/{POLICY_FILE})")


# -- evaluation ----------------------------------------------------------------------------


def evaluate(policy: Policy, facts: Facts) -> Decision:
    """The first level, highest first, whose conditions fire; low (or auto) when none does."""
    matchers = _Groups(policy.groups, [f.path for f in facts.files])
    for level in policy.levels:
        fired_any = [r for c in level.when_any if (r := _fires(c, facts, matchers))]
        fired_all = [_fires(c, facts, matchers) for c in level.when_all]
        all_ok = bool(level.when_all) and all(fired_all)
        always = not level.when_any and not level.when_all
        if always or fired_any or all_ok:
            reasons = [r for r in fired_all if r] if all_ok else []
            reasons += fired_any
            return Decision(
                level.name,
                level.action,
                reasons or ["no condition of a higher level fired"],
                level.timeout_minutes,
                level.approvers,
                list(level.approvers_from),
            )
    return Decision("low", "auto_approve", ["no level of the policy fired"])


class _Groups:
    """Which changed paths each sensitive group matches, computed once per group and evaluation
    (a group is usually named by more than one level)."""

    def __init__(self, groups: dict[str, tuple[str, ...]], paths: list[str]) -> None:
        self.groups = groups
        self.paths = paths
        self.found: dict[str, list[str]] = {}

    def __getitem__(self, group: str) -> list[str]:
        if group not in self.found:
            import pathspec

            spec = pathspec.GitIgnoreSpec.from_lines(self.groups[group])
            self.found[group] = [p for p in self.paths if spec.match_file(p)]
        return self.found[group]


def _fires(condition: tuple[str, Any], facts: Facts, matchers: _Groups) -> str | None:
    """The reason the condition fires, in words, or None."""
    name, value = condition
    count = len(facts.files)
    if name == "files_over":
        return f"{counted(count, 'file')} changed (over {value})" if count > value else None
    if name == "lines_over":
        lines = facts.lines
        return f"{counted(lines, 'line')} changed (over {value})" if lines > value else None
    if name == "deleted_files_over":
        gone = facts.deleted
        return f"{counted(len(gone), 'file')} deleted: {_some(gone)}" if len(gone) > value else None
    if name == "sensitive":
        hits = []
        for group in value:
            paths = matchers[group]
            if paths:
                hits.append(f"{group} ({_some(paths)})")
        return f"sensitive paths: {'; '.join(hits)}" if hits else None
    if name == "review_issues" and isinstance(value, tuple):
        graver = [i for i in facts.review_issues if _severity(i) in value]
        return f"review issues ({', '.join(value)}): {_some(graver)}" if graver else None
    found = {
        "review_issues": (facts.review_issues, "issues listed by approving reviews"),
        "public_api_changed": (facts.api_changes, "public API changed"),
        "gates_fixed": (facts.fixed_gates, "gate(s) failed, then passed"),
        "security_concerns": (facts.security_concerns, "reviewer security concerns"),
        "tests_changed": (
            facts.spec_changes,
            "existing tests changed and the base's tests fail on this code",
        ),
        "test_tamper_signals": (facts.tamper_signals, "existing tests weakened"),
    }[name]
    items, words = found
    if bool(items) == value:
        return f"{words}: {_some(items)}" if items else f"no {words}"
    return None


def _severity(issue: str) -> str:
    """`reviewer: [major] calc.py: ...` -> `major`."""
    _, _, rest = issue.partition(": [")
    return rest.partition("]")[0]


def _some(items: list[str], limit: int = 4) -> str:
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _said(name: str, value: Any) -> str:
    """One condition in a person's words, for the start preview."""
    if name == "sensitive":
        return "the change touches " + "/".join(value) + " paths"
    if name == "deleted_files_over":
        return "it deletes a file" if not value else f"it deletes over {value} files"
    if name == "review_issues" and isinstance(value, list | tuple):
        return f"a reviewer lists {'/'.join(value)} issues"
    return {
        "files_over": f"it changes over {value} files",
        "lines_over": f"it changes over {value} lines",
        "public_api_changed": "it changes a public API",
        "gates_fixed": "it fixes a gate that failed earlier",
        "security_concerns": "a reviewer lists security concerns",
        "review_issues": "a reviewer lists issues",
        "tests_changed": "it changes existing tests that its code no longer passes",
        "test_tamper_signals": "it weakens existing tests",
    }.get(name, name)


def stop_conditions(policy: Policy) -> list[str]:
    """When the policy stops a run for a person, in words: each stopping level's `when_any`
    conditions, and its `when_all` ones joined by "and" unless each of them stops alone; a
    level with no condition stops every candidate ("always")."""
    stopping = [level for level in policy.levels if level.action in STOPS]
    alone = list(dict.fromkeys(_said(n, v) for level in stopping for n, v in level.when_any))
    said = list(alone)
    for level in stopping:
        together = [_said(n, v) for n, v in level.when_all]
        if together and not set(together) <= set(alone):
            said.append(" and ".join(together))
        if not together and not level.when_any:
            said.append("always")
    return list(dict.fromkeys(said))


def describe(risk: dict[str, Any]) -> list[str]:
    """A recorded decision (`as_context`), as the lines `approve`, `status` and the TUI show."""
    action = risk.get("action", "?")
    how = {
        "require_multi_approval": f"needs {risk.get('approvers', 2)} distinct approvers"
        + (f" from {', '.join(risk['approvers_from'])}" if risk.get("approvers_from") else ""),
        "require_approval": "needs one approval",
        "notify_and_timeout": f"goes on after {risk.get('timeout_minutes', 0):g} min unless "
        "rejected",
        "auto_approve": "approved automatically",
    }.get(action, action)
    lines = [f"risk: {risk.get('level', '?')} ({how})"]
    lines += [f"  why: {reason}" for reason in risk.get("reasons", [])]
    approved = risk.get("approved_by") or []
    if approved:
        lines.append(f"  approved so far by: {', '.join(approved)}")
    return lines
