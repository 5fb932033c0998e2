"""`supervisor roles` and `supervisor role` say which is which (issue 59): `roles` lists and shows
the roles in effect, `role` manages role packs; both groups once listed the same `list` and
`show`, described alike. `role list` and `role show` still run, the same commands, for scripts
that call them. The command line in-process (tests/cli_support.py), a fresh repository."""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING

import pytest
from cli_support import supervisor

if TYPE_CHECKING:
    from pathlib import Path


def helped(*group: str) -> str:
    done = supervisor(*group, "--help", columns=100)
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.replace("│", " ").split())


def test_each_group_says_what_it_is_for_and_points_at_the_other() -> None:
    roles, role = helped("roles"), helped("role")
    assert "Roles in effect: list them" in roles and "`supervisor role`" in roles
    assert "Role packs" in role and "`supervisor roles list`" in role
    commands = role.split(" Commands ", 1)[1]
    assert " install " in commands and " search " in commands
    assert " list " not in commands and " show " not in commands  # they are `roles`'


@pytest.mark.parametrize("group", ["roles", "role"])
def test_list_and_show_run_under_both_groups_alike(
    group: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    rows = json.loads(supervisor(group, "list", "--json", "--repo", str(repo)).stdout)
    assert "reviewer" in {r["role"] for r in rows}
    shown = json.loads(supervisor(group, "show", "reviewer", "--json", "--repo", str(repo)).stdout)
    assert shown["role"]["name"] == "reviewer"
