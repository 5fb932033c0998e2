"""What a workspace's project image is built from: the top-level dependency files and, in a
workspace (pnpm-workspace.yaml, go.work, `workspaces` in package.json, a Cargo or uv workspace),
every member's own manifest, so the package manager installs the whole workspace and the image
links the members' packages to the mounted worktree. The end-to-end proof that the gates then
run offline against the candidate's shared package: tests/test_monorepo_pnpm_e2e.py and
tests/test_monorepo_go_e2e.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from supervisor.core.errors import SandboxError
from supervisor.project.detect import detect
from supervisor.project.project_image import dependency_files, dockerfile_text
from supervisor.workspace.treedata import CommitFiles

FIXTURES = Path(__file__).parent / "fixtures"
PNPM_FILES = {
    "package.json",
    "pnpm-lock.yaml",
    "pnpm-workspace.yaml",
    "apps/cli/package.json",
    "apps/web/package.json",
    "packages/types/package.json",
}


def committed(tmp_path: Path, fixture: str) -> tuple[Path, CommitFiles]:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / fixture, repo)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
    return repo, CommitFiles(repo / ".git", head.stdout.strip())


def test_a_pnpm_workspace_image_is_built_from_every_members_manifest(tmp_path: Path) -> None:
    repo, commit = committed(tmp_path, "pnpm_workspace")
    for where in ("node_modules/left-pad", "apps/web/test/fixtures/x", ".hidden/pkg"):
        (repo / where).mkdir(parents=True)
        (repo / where / "package.json").write_text("{}")

    assert set(dependency_files(repo)) == PNPM_FILES  # the checkout (`sandbox build`)
    assert set(dependency_files(commit)) == PNPM_FILES  # a candidate's blobs (a gate)


def test_a_go_workspace_image_is_built_from_go_work_and_every_modules_go_mod(
    tmp_path: Path,
) -> None:
    repo, commit = committed(tmp_path, "go_workspace")

    expected = {"go.work", "types/go.mod", "cmd/area/go.mod", "cmd/span/go.mod"}
    assert set(dependency_files(repo)) == expected
    assert set(dependency_files(commit)) == expected


def test_a_repository_that_is_no_workspace_keeps_to_its_top_level_files(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text('{"name": "one"}')
    (tmp_path / "examples" / "demo").mkdir(parents=True)
    (tmp_path / "examples" / "demo" / "package.json").write_text('{"name": "demo"}')

    assert set(dependency_files(tmp_path)) == {"package.json"}


def test_a_members_manifest_that_is_a_link_is_refused(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "pnpm_workspace", tmp_path / "repo")
    member = tmp_path / "repo" / "apps" / "web" / "package.json"
    member.unlink()
    member.symlink_to("/etc/passwd")

    with pytest.raises(SandboxError) as caught:
        dependency_files(tmp_path / "repo")
    assert "apps/web/package.json (-> /etc/passwd)" in caught.value.message


def test_a_pnpm_workspace_installs_as_it_says_and_links_its_packages_to_the_worktree() -> None:
    text = dockerfile_text(detect(FIXTURES / "pnpm_workspace"), "base")

    assert "node-linker" not in text  # the project's own layout (isolated, by default)
    assert 'fs.symlinkSync(path.join("/workspace", path.dirname(file)), link)' in text
    assert 'mv "$member/node_modules" "/workspace/$member/"' in text  # each member's own
    assert text.index("node -e") < text.index("LABEL supervisor.node-modules=")


def test_a_go_workspace_is_detected_and_downloads_each_modules_requirements() -> None:
    detection = detect(FIXTURES / "go_workspace")

    assert "go" in detection.stacks and "go-workspace" in detection.frameworks
    assert "test" not in detection.gates  # no module at the root: each module's own gates
    text = dockerfile_text(detection, "base")
    assert "apt-get install -y --no-install-recommends golang" in text
    assert "-mod=mod GOPROXY=off" not in text  # refused in workspace mode
    assert "GOWORK=off GOFLAGS=-mod=mod" in text and "go mod download" in text


@pytest.mark.docker
def test_attack_a_member_named_like_an_installed_tool_or_a_path_links_nothing(
    tmp_path: Path,
) -> None:
    """The link step itself, run by the base image's node as the image build runs it: a member
    named `vitest` (the gate's runner, installed) or `../../etc` shadows nothing; the workspace's
    own packages link to their directories in the worktree, replacing the install's links."""
    from e2e_support import IMAGE, require_sandbox

    from supervisor.project.dockerfile_sections import LINK_MEMBERS

    require_sandbox()
    members = {
        "packages/types": '{"name": "@shapes/types"}',
        "packages/runner": '{"name": "vitest"}',
        "packages/escape": '{"name": "../../etc"}',
        "packages/broken": "{not json",
    }
    for directory, manifest in members.items():
        (tmp_path / directory).mkdir(parents=True)
        (tmp_path / directory / "package.json").write_text(manifest)
    script = (
        "mkdir -p /node_modules/vitest /node_modules/@shapes"
        " && ln -s ../../packages/types /node_modules/@shapes/types"  # the install's own link
        " && cp -r /in /deps && cd /deps"
        f" && node -e '{LINK_MEMBERS}'"
        " $(find . -mindepth 2 -name package.json -not -path '*/node_modules/*')"
        " && find /node_modules -maxdepth 2 -printf '%p %y %l\\n' | sort"
    )
    ran = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "-u", "0", "-v", f"{tmp_path}:/in:ro",
         IMAGE, "sh", "-c", script],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert ran.returncode == 0, ran.stderr
    listing = ran.stdout.splitlines()
    assert "/node_modules/@shapes/types l /workspace/packages/types" in listing
    assert "/node_modules/vitest d " in listing  # the installed runner, left as it was
    assert not [line for line in listing if "etc" in line or "broken" in line]


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("Cargo.toml", '[workspace]\nmembers = ["crates/*"]\n'),
        (
            "pyproject.toml",
            '[project]\nname = "x"\n\n[tool.uv.workspace]\nmembers = ["crates/*"]\n',
        ),
        ("package.json", '{"name": "x", "workspaces": ["crates/*"]}'),
    ],
)
def test_cargo_uv_and_npm_workspaces_bring_their_members_manifests(
    tmp_path: Path, name: str, text: str
) -> None:
    (tmp_path / name).write_text(text)
    (tmp_path / "crates" / "core").mkdir(parents=True)
    (tmp_path / "crates" / "core" / name).write_text(text.replace("workspace", "other"))

    assert set(dependency_files(tmp_path)) == {name, f"crates/core/{name}"}


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("package.json", '{"name": "x", "description": "no \\"workspaces\\" here"}'),
        ("package.json", "[1, 2]"),
        ("pyproject.toml", "[tool]\nuv = 3\n"),
        ("Cargo.toml", "[workspace\n"),
    ],
)
def test_a_manifest_that_declares_no_workspace_or_does_not_parse_brings_none(
    tmp_path: Path, name: str, text: str
) -> None:
    (tmp_path / name).write_text(text)
    (tmp_path / "crates" / "core").mkdir(parents=True)
    (tmp_path / "crates" / "core" / name).write_text(text)

    assert set(dependency_files(tmp_path)) == {name}
