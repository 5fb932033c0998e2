"""A Node workspace's node_modules where its package manager lays them out in a checkout, and
its tests run after its build when they import what the build makes (issue 57, changesets).

The image keeps each member's node_modules at /workspace/<member>/node_modules and the root's
as links at /workspace/node_modules, listed in a file the image names by label; every run
mounts its own copy of each over the worktree (supervisor/sandbox/node_modules.py). The
end-to-end proof, a member's own dependency resolved in an offline gate:
tests/test_monorepo_pnpm_e2e.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from supervisor.project.detect import detect
from supervisor.project.dockerfile_sections import NODE_MODULES_LIST, node_section
from supervisor.sandbox.node_modules import LIST_FILE, folders, mounts

FIXTURE = Path(__file__).parent / "fixtures" / "pnpm_workspace"


def test_the_listed_folders_are_mounted_at_their_checkout_paths_none_leaving_it() -> None:
    listing = ".\npackages/cli\n\napps/web/\n../etc\n/etc\napps/../../x\npackages/cli\na\\b\n"

    assert folders(listing) == (
        "/workspace/node_modules",
        "/workspace/packages/cli/node_modules",
        "/workspace/apps/web/node_modules",
    )
    assert LIST_FILE == NODE_MODULES_LIST  # what the Dockerfile writes is what a run reads
    assert mounts(None, None) == []  # the base image: nothing to place


def test_every_node_image_lays_out_node_modules_at_the_workspace_after_its_links() -> None:
    for manager, version in (("npm", ""), ("pnpm", "11.13.1"), ("yarn", "4.5.2")):
        _, install = node_section(manager, version)
        assert f"echo . > {NODE_MODULES_LIST}" in install  # the root's, always
        assert 'ln -s "$entry" /workspace/node_modules/' in install
        assert f'echo "$member" >> {NODE_MODULES_LIST}' in install
        assert f"LABEL supervisor.node-modules={NODE_MODULES_LIST}" in install
        assert install.index("mv node_modules /node_modules") < install.index("node -e")
        assert install.index("node -e") < install.index("/workspace/node_modules/")


def _workspace(tmp_path: Path, *, commit_dist: bool, build: bool = True) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo)
    root = json.loads((repo / "package.json").read_text())
    root["scripts"] = {"test": "vitest", **({"build": "tsdown"} if build else {})}
    (repo / "package.json").write_text(json.dumps(root))
    types = repo / "packages" / "types" / "package.json"
    manifest = json.loads(types.read_text())
    manifest["exports"] = {".": {"types": "./dist/index.d.mts", "default": "./dist/index.mjs"}}
    manifest["main"] = "./dist/index.mjs"
    types.write_text(json.dumps(manifest))
    (repo / "packages" / "types" / "dist").mkdir()  # built locally, not committed
    for name in ("index.mjs", "index.d.mts"):
        (repo / "packages" / "types" / "dist" / name).write_text("export {};\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    if not commit_dist:
        (repo / ".gitignore").write_text("dist/\nnode_modules/\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    return repo


def test_a_workspace_whose_packages_export_an_uncommitted_build_tests_after_building(
    tmp_path: Path,
) -> None:
    detection = detect(_workspace(tmp_path, commit_dist=False))

    assert detection.gates["test"] == "pnpm run build && pnpm test"
    assert (
        "packages/types/package.json (main: ./dist/index.mjs)" in (detection.evidence["gate:test"])
    )


def test_committed_entry_points_or_no_build_script_leave_the_test_gate_alone(
    tmp_path: Path,
) -> None:
    assert detect(_workspace(tmp_path / "a", commit_dist=True)).gates["test"] == "pnpm test"
    unbuildable = _workspace(tmp_path / "b", commit_dist=False, build=False)
    assert detect(unbuildable).gates["test"] == "pnpm test"
    assert "test" not in detect(FIXTURE).gates  # the fixture itself: no test script
