"""The trust map: every `.supervisor/` path the host reads is classified, and is read through the
map as what the map says it is."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from source_trees import parsed

import supervisor
from supervisor.core import trustmap

SOURCE = Path(supervisor.__file__).parent

# `.supervisor` literals that are not a repository input: the user's own directory
# (`Path.home() / ".supervisor"`), the name of the state directory, the protected-path glob that
# keeps workers out of it, and the directory a project scan skips.
ALLOWED_NAMES = {"STATE_DIR", "DEFAULT_PROTECTED", "SKIP_DIRS"}


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _allowed(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    parent = parents.get(node)
    if isinstance(parent, ast.BinOp) and "Path.home()" in ast.unparse(parent.left):
        return True
    while parent is not None and not isinstance(parent, ast.stmt):
        parent = parents.get(parent)
    targets = (
        parent.targets
        if isinstance(parent, ast.Assign)
        else [parent.target]
        if isinstance(parent, ast.AnnAssign)
        else []
    )
    return any(isinstance(t, ast.Name) and t.id in ALLOWED_NAMES for t in targets)


def supervisor_literals() -> list[str]:
    """Each `.supervisor` path literal outside the trust map, as `file:line: text`."""
    found = []
    for file in sorted(SOURCE.rglob("*.py")):
        if file.name == "trustmap.py":
            continue
        tree = parsed(file.read_text(encoding="utf-8"), str(file))
        literals = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith(".supervisor")
        ]
        if not literals:
            continue  # most modules: no parent map to build (a second walk of the whole tree)
        parents = _parents(tree)
        found += [
            f"{file.relative_to(SOURCE)}:{node.lineno}: {node.value!r}"
            for node in literals
            if not _allowed(node, parents)
        ]
    return found


def state_dir_joins() -> list[tuple[str, str]]:
    """Each `<state dir> / "<name>"` in the source: (where, `.supervisor/<name>`)."""
    found = []
    for file in sorted(SOURCE.rglob("*.py")):
        tree = parsed(file.read_text(encoding="utf-8"), str(file))
        names = {
            t.id: n.value.value
            for n in tree.body
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
            for t in n.targets
            if isinstance(t, ast.Name) and isinstance(n.value.value, str)
        }
        for node in ast.walk(tree):
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
                continue
            left = ast.unparse(node.left)
            if not left.endswith(("state_dir", "STATE_DIR")):
                continue
            right = node.right
            name = (
                right.value
                if isinstance(right, ast.Constant)
                else names.get(right.id)
                if isinstance(right, ast.Name)
                else None
            )
            if isinstance(name, str):
                found.append((f"{file.relative_to(SOURCE)}:{node.lineno}", f".supervisor/{name}"))
    return found


def test_no_code_outside_the_map_spells_a_repository_supervisor_path() -> None:
    assert supervisor_literals() == [], (
        "Read repository `.supervisor/` paths through supervisor.core.trustmap.repo_path(), "
        "with the class the map gives them."
    )


def test_every_path_joined_to_the_state_directory_is_in_the_map() -> None:
    joins = state_dir_joins()
    assert joins, "the scan found no joins at all: it no longer sees the source"
    unmapped = [f"{where}: {path}" for where, path in joins if trustmap.classify(path) is None]
    assert unmapped == []


def test_each_repository_input_has_its_class() -> None:
    kinds = {
        rel: trustmap.classify(rel).kind  # type: ignore[union-attr]
        for rel in (
            ".supervisor/config.yaml",
            ".supervisor/templates/planning.j2",
            ".supervisor/templates/partials/x.j2",
            ".supervisor/roles/implementer.yaml",
            ".supervisor/approval_policy.yaml",
            ".supervisor/sandbox/Dockerfile",
            ".supervisor/context_strategies/wide.yaml",
            ".supervisor/workflow.yaml",
            ".supervisor/worktrees/wf1-implement/calc.py",
        )
    }
    assert kinds == {
        ".supervisor/config.yaml": "needs-trust",
        ".supervisor/templates/planning.j2": "needs-trust",
        ".supervisor/templates/partials/x.j2": "needs-trust",
        ".supervisor/roles/implementer.yaml": "needs-trust",
        ".supervisor/approval_policy.yaml": "needs-trust",
        ".supervisor/sandbox/Dockerfile": "needs-trust",
        ".supervisor/context_strategies/wide.yaml": "data",
        ".supervisor/workflow.yaml": "data",
        ".supervisor/worktrees/wf1-implement/calc.py": "sandbox-only",
    }


def test_a_reader_of_an_unmapped_path_or_under_another_class_fails_at_once(
    tmp_path: Path,
) -> None:
    with pytest.raises(trustmap.UnmappedInputError, match="not in the trust map"):
        trustmap.repo_path(tmp_path, ".supervisor/plugins/x.py", trustmap.DATA)
    with pytest.raises(trustmap.UnmappedInputError, match=r"is needs-trust .* read as data"):
        trustmap.repo_path(tmp_path, trustmap.TEMPLATES, trustmap.DATA)
    assert trustmap.repo_path(tmp_path, trustmap.ROLES, trustmap.NEEDS_TRUST) == (
        tmp_path / ".supervisor" / "roles"
    )


@pytest.mark.parametrize(
    ("project", "below", "weakened"),
    [
        ({"protected_paths": {"remove": ["Makefile"]}}, {}, ["protected_paths.remove"]),
        ({"protected_paths": {"add": ["docs/**"]}}, {}, []),
        (
            {"sandbox": {"dependency_changes": "allow"}},
            {"sandbox": {"dependency_changes": "approve"}},
            ["sandbox.dependency_changes"],
        ),
        (
            {"limits": {"max_files_added": 9000}},
            {"limits": {"max_files_added": 2000}},
            ["limits.max_files_added"],
        ),
        ({"limits": {"max_files_added": 10}}, {"limits": {"max_files_added": 2000}}, []),
        (
            {"limits": {"worker_memory": "64g"}},
            {"limits": {"worker_memory": "4g"}},
            ["limits.worker_memory"],
        ),
        ({"limits": {"worker_memory": "1g"}}, {"limits": {"worker_memory": "4g"}}, []),
        (
            {"limits": {"component_scope": "allow"}},
            {"limits": {"component_scope": "feedback"}},
            ["limits.component_scope"],
        ),
        (
            {"budgets": {"task": {"usd": 500}}},
            {"budgets": {"task": {"usd": 5}}},
            ["budgets.task.usd"],
        ),
        ({"budgets": {"task": {"usd": 5}}}, {}, []),  # a budget where there was none: stricter
        ({"workflow": {"disable": ["security_review"]}}, {}, ["workflow.disable"]),
        (
            {"workflow": {"overrides": {"commit": {"human_approval": False}}}},
            {},
            ["workflow.overrides.commit.human_approval"],
        ),
    ],
)
def test_a_setting_that_weakens_a_protection_is_found(
    project: dict[str, object], below: dict[str, object], weakened: list[str]
) -> None:
    assert list(trustmap.weakenings(project, below)) == weakened
    for key in weakened:
        assert trustmap.setting(key) is not None, f"{key} has no effect to show"
