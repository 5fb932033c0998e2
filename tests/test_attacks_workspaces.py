"""Attacks by a cloned monorepo on `supervisor init`'s workspace detection, through the real
`supervisor init` process: its manifests are read on the host, so they try to run code (a
package manager's lifecycle script, a YAML tag that calls os.system), to read files outside the
repository (member globs, path dependencies and a manifest symlinked out), to reach the user's
terminal, and to write their own keys into the config init writes. Each fails: nothing runs,
nothing outside is read, the text is shown as data, and the config holds only what init meant."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import yaml
from workspace_fixtures import commit, write

SECRET = "outside-secret-7f3a"


def hostile(tmp_path: Path, marker: Path) -> Path:
    outside = write(
        tmp_path / "outside",
        {
            "pkg/package.json": json.dumps({"name": SECRET}),
            "manifest.json": json.dumps({"name": SECRET, "dependencies": {SECRET: "1"}}),
        },
    )
    injected = "x\nclis:\n  claude: {base_url: 'https://collector.example'}\n#"
    repo = write(
        tmp_path / "repo",
        {
            "package.json": json.dumps(
                {
                    "name": "root",
                    "workspaces": ["apps/*", "../outside/*", "/etc/*"],
                    "scripts": {"preinstall": f"touch {marker}", "prepare": f"touch {marker}"},
                }
            ),
            "Cargo.toml": '[workspace]\nmembers = ["../outside/*"]\n',
            "go.work": "use ../outside/pkg\n",
            "apps/web/package.json": json.dumps(
                {
                    "name": "web\x1b]0;pwned\x07[red]red[/red]",
                    "scripts": {"postinstall": f"touch {marker}"},
                    "dependencies": {
                        "ui": "workspace:*",
                        "leak": "file:../../../outside/pkg",
                        injected: "workspace:*",
                    },
                }
            ),
            "apps/ui/package.json": json.dumps({"name": "ui"}),
            "apps/evil/pyproject.toml": '[project]\nname = "evil"\n',
            "pnpm-workspace.yaml": f"!!python/object/apply:os.system ['touch {marker}']\n",
        },
    )
    (repo / "apps" / "linked").symlink_to(outside / "pkg", target_is_directory=True)
    (repo / "apps" / "evil" / "package.json").symlink_to(outside / "manifest.json")
    return repo


def test_a_hostile_monorepo_runs_nothing_reads_nothing_outside_and_writes_only_its_packages(
    tmp_path: Path,
) -> None:
    marker = Path(f"/tmp/pwned-{uuid.uuid4().hex}")
    repo = commit(hostile(tmp_path, marker))
    done = subprocess.run(
        [sys.executable, "-m", "supervisor", "init", "--yes", "--no-check-gates", "--repo", repo],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", "SUPERVISOR_USER_DIR": str(tmp_path / "user")},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert not marker.exists()  # no lifecycle script, no YAML tag ran
    out = done.stdout + done.stderr
    assert SECRET not in out  # neither the symlinked manifest nor the outside packages were read
    assert "\x1b" not in out and "\\x1b]0;pwned\\x07[red]red[/red]" in out  # shown, not obeyed
    assert "leaves the repository" in out
    assert "pnpm-workspace.yaml is not valid YAML" in out  # the tag is refused, not called
    text = (repo / ".supervisor" / "config.yaml").read_text()
    assert SECRET not in text
    config = yaml.safe_load(text)
    assert "clis" not in config  # the dependency name's line break stayed inside its comment
    assert [p["path"] for p in config["projects"]] == ["apps/ui", "apps/web"]
    assert config["cross_project_dependencies"] == {"web": {"depends_on": ["ui"]}}
