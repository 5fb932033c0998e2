"""`supervisor init`: detection on sample repositories of each kind, and re-runs that never
overwrite what the user edited."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_support import supervisor

from supervisor.context.roles import load_role
from supervisor.lifecycle.initialize import initialize, pack_roles
from supervisor.project.detect import detect


def make(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


SAMPLES: dict[str, tuple[dict[str, str], dict[str, object]]] = {
    "python-data": (
        {"requirements.txt": "pandas==2.2\napache-airflow>=2\n# comment\n", "dags/etl.py": ""},
        {"stacks": ["python"], "frameworks": {"pandas", "airflow"}, "packs": ["data_pipeline"]},
    ),
    "python-cli": (
        {
            "pyproject.toml": '[project]\nname="x"\ndependencies=["typer>=0.9"]\n'
            '[project.optional-dependencies]\ndev=["pytest","ruff"]\n'
            '[project.scripts]\nx="x:main"\n',
            "tests/test_x.py": "",
        },
        {
            "frameworks": {"typer", "cli-entry-point"},
            "packs": ["cli_tooling"],
            "gates": {"test": "python3 -m pytest -q", "lint": "ruff check ."},
        },
    ),
    "fastapi-postgres": (
        {
            "requirements.txt": "fastapi\nuvicorn\n",
            "docker-compose.yml": "services:\n  db:\n    image: postgres:16\n  api:\n"
            "    build: .\n",
        },
        {
            "frameworks": {"fastapi", "postgres", "docker-compose"},
            "packs": ["backend_api", "infrastructure"],
        },
    ),
    "react": (
        {
            "package.json": json.dumps(
                {
                    "dependencies": {"react": "^18"},
                    "scripts": {"test": 'echo "Error: no test specified"'},
                }
            )
        },
        {"stacks": ["node"], "frameworks": {"react"}, "packs": ["web_frontend"], "gates": {}},
    ),
    "vue-with-tests": (
        {
            "package.json": json.dumps(
                {
                    "dependencies": {"vue": "^3"},
                    "devDependencies": {"eslint": "^9"},
                    "scripts": {"test": "vitest run", "lint": "eslint ."},
                }
            )
        },
        {
            "frameworks": {"vue", "eslint"},
            "packs": ["web_frontend"],
            "gates": {"test": "npm test", "lint": "npm run lint"},
        },
    ),
    "express": (
        {"package.json": json.dumps({"dependencies": {"express": "^4", "pg": "^8"}})},
        {"frameworks": {"express", "postgres"}, "packs": ["backend_api"]},
    ),
    "rust": (
        {"Cargo.toml": '[package]\nname="x"\n', "src/main.rs": "fn main(){}\n"},
        {
            "stacks": ["rust"],
            "packs": ["rust"],
            "gates": {"test": "cargo test", "lint": "cargo clippy -- -D warnings"},
        },
    ),
    "go": (
        {"go.mod": "module x\n\ngo 1.22\n"},
        {
            "stacks": ["go"],
            "packs": ["go"],
            "gates": {"test": "go test ./...", "lint": "go vet ./..."},
        },
    ),
    "solidity": (
        {
            "contracts/Token.sol": "pragma solidity ^0.8.0;\n",
            "package.json": json.dumps({"devDependencies": {"hardhat": "^2"}}),
        },
        {"frameworks": {"hardhat"}, "packs": ["smart_contracts"]},
    ),
    "terraform": (
        {
            "infra/main.tf": 'resource "x" "y" {}\n',
            "k8s/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\n",
        },
        {"frameworks": {"terraform", "kubernetes"}, "packs": ["infrastructure"]},
    ),
    "trading": (
        {"requirements.txt": "ccxt\nnumpy\n"},
        {"frameworks": {"ccxt"}, "packs": ["trading"]},
    ),
    "makefile-wins": (
        {"requirements.txt": "pytest\n", "Makefile": "test:\n\tpytest\nlint:\n\truff .\n"},
        {"gates": {"test": "make test", "lint": "make lint"}},
    ),
    "empty": ({"notes.txt": "hello\n"}, {"stacks": [], "packs": [], "gates": {}}),
}


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_detection_on_sample_repositories(tmp_path: Path, sample: str) -> None:
    files, expected = SAMPLES[sample]
    found = detect(make(tmp_path, files))
    if "stacks" in expected:
        assert found.stacks[: len(expected["stacks"])] == expected["stacks"]  # type: ignore[arg-type]
    if "frameworks" in expected:
        assert expected["frameworks"] <= set(found.frameworks)  # type: ignore[operator]
    if "packs" in expected:
        assert found.role_packs == expected["packs"]
    if "gates" in expected:
        assert found.gates == expected["gates"]
    for finding in found.stacks + found.frameworks:
        assert finding in found.evidence  # every finding says which file shows it
    assert found.optional_packs == ["security"]


def test_detection_skips_dependency_folders(tmp_path: Path) -> None:
    make(tmp_path, {"node_modules/x/Token.sol": "", ".venv/lib/main.tf": ""})
    found = detect(tmp_path)
    assert found.stacks == [] and found.frameworks == []


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))


def test_init_writes_config_roles_and_templates_folder(tmp_path: Path, user_dir: None) -> None:
    repo = make(tmp_path / "repo", SAMPLES["fastapi-postgres"][0])
    report = initialize(repo)
    state = repo / ".supervisor"
    assert report.packs == ["backend_api", "infrastructure"]
    text = (state / "config.yaml").read_text()
    assert "No test command was detected" in text and "--no-gate" in text
    assert "clis.<cli>.base_url" in text or "#   claude: {base_url:" in text
    for pack in report.packs:
        for role in pack_roles(pack):
            assert (state / "roles" / f"{role}.yaml").is_file()
            assert load_role(role, repo).name == role  # installed roles resolve
    assert (state / "templates").is_dir()
    assert "config.yaml" in report.written


def test_running_init_again_leaves_edited_files_alone(tmp_path: Path, user_dir: None) -> None:
    repo = make(tmp_path / "repo", SAMPLES["go"][0])
    initialize(repo)
    config = repo / ".supervisor" / "config.yaml"
    edited = config.read_text() + "limits: {gate_timeout_seconds: 42}\n"
    config.write_text(edited)
    again = initialize(repo)
    assert "config.yaml" in again.left_alone
    assert config.read_text() == edited
    assert "roles/go_dev.yaml" in again.unchanged


def test_init_choices_decide_the_packs(tmp_path: Path, user_dir: None) -> None:
    repo = make(tmp_path / "repo", SAMPLES["rust"][0])
    report = initialize(repo, lambda pack, suggested: pack in ("security", "go"))
    assert report.packs == ["security", "go"]
    assert not (repo / ".supervisor" / "roles" / "rust_dev.yaml").exists()
    assert (repo / ".supervisor" / "roles" / "appsec_reviewer.yaml").exists()


def test_a_pack_not_chosen_again_leaves_with_its_roles_unless_they_were_edited(
    tmp_path: Path, user_dir: None
) -> None:
    """Issue 59: an interactive init chose `security` and `go`; `init --yes` afterwards (the
    suggested packs only) said "Role packs: rust" but left the security roles active."""
    repo = make(tmp_path / "repo", SAMPLES["rust"][0])
    initialize(repo, lambda pack, suggested: pack in ("security", "go"))
    roles = repo / ".supervisor" / "roles"
    edited = roles / "go_dev.yaml"
    edited.write_text(edited.read_text() + "# mine\n")

    again = initialize(repo)

    assert "security" not in again.packs
    assert not (roles / "appsec_reviewer.yaml").exists()
    assert "roles/appsec_reviewer.yaml" in again.removed
    assert edited.is_file() and "roles/go_dev.yaml" in again.left_alone  # the user's own edit
    assert "# Role packs: rust" in (repo / ".supervisor" / "config.yaml").read_text()


def test_init_command_with_yes(tmp_path: Path, user_dir: None) -> None:
    repo = make(tmp_path / "repo", SAMPLES["trading"][0])
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "i"],
        check=True,
    )
    result = supervisor("init", "--yes", "--repo", str(repo))
    assert result.returncode == 0, result.stderr
    assert "trading" in result.stdout
    assert (repo / ".supervisor" / "roles" / "risk_manager.yaml").is_file()


FIXTURES = Path(__file__).parent / "fixtures"

GATE_SAMPLES: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "unittest-files-only": (
        {"calc.py": "", "test_calc.py": "import unittest\n"},
        {"test": "python3 -m pytest -q"},
    ),
    "pytest-in-pyproject": (
        {"pyproject.toml": '[project]\nname="x"\n[tool.pytest.ini_options]\naddopts="-q"\n'},
        {"test": "python3 -m pytest -q"},
    ),
    "pytest-in-setup-cfg": (
        {"setup.cfg": "[metadata]\nname = x\n[tool:pytest]\ntestpaths = t\n"},
        {"test": "python3 -m pytest -q"},
    ),
    "pytest-in-tox-ini": (
        {"setup.py": "", "tox.ini": "[testenv]\ncommands = pytest\n"},
        {"test": "python3 -m pytest -q"},
    ),
    "pytest-in-noxfile": (
        {"setup.py": "", "noxfile.py": "def tests(s):\n    s.run('pytest')\n"},
        {"test": "python3 -m pytest -q"},
    ),
    "python-without-tests": ({"setup.py": "", "x.py": "print(1)\n"}, {}),
    "makefile-without-a-test-target": (
        {"Makefile": "build:\n\tcc x.c\n", "x.c": ""},
        {},
    ),
    "npm-default-test-script": (
        {"package.json": json.dumps({"scripts": {"test": 'echo "Error: no test specified"'}})},
        {},
    ),
    "yarn-with-a-test-script": (
        {"package.json": json.dumps({"scripts": {"test": "jest"}}), "yarn.lock": ""},
        {"test": "yarn test"},
    ),
    "cargo": ({"Cargo.toml": "[package]\nname='x'\n"}, {"test": "cargo test"}),
    "go": ({"go.mod": "module x\n"}, {"test": "go test ./..."}),
}


@pytest.mark.parametrize("sample", sorted(GATE_SAMPLES))
def test_a_test_gate_is_proposed_only_where_the_tree_shows_one(tmp_path: Path, sample: str) -> None:
    files, expected = GATE_SAMPLES[sample]
    found = detect(make(tmp_path, files))
    assert {k: v for k, v in found.gates.items() if k == "test"} == expected
    if expected:
        assert found.evidence["gate:test"]  # says which file shows the test runner


def test_a_setup_py_package_with_unittest_tests_gets_pytest(tmp_path: Path) -> None:
    found = detect(FIXTURES / "py_slugger")
    assert found.stacks == ["python"]
    assert found.gates == {"test": "python3 -m pytest -q"}
    assert found.evidence["gate:test"] == "tests/test_slugger.py (tests)"


def test_a_pnpm_typescript_vitest_project_is_recognised(tmp_path: Path) -> None:
    found = detect(FIXTURES / "ts_vitest")
    assert found.stacks == ["node"]
    assert {"typescript", "vitest"} <= set(found.frameworks)
    assert (found.package_manager, found.package_manager_version) == ("pnpm", "9.15.0")
    assert found.evidence["package-manager"] == "package.json (packageManager)"
    assert found.gates == {
        "test": "pnpm test",
        "lint": "pnpm run lint",
        "types": "pnpm run typecheck",
    }


def test_a_pnpm_lock_file_alone_names_pnpm(tmp_path: Path) -> None:
    package = {"scripts": {"test": "vitest run"}, "devDependencies": {"vitest": "2"}}
    found = detect(make(tmp_path, {"package.json": json.dumps(package), "pnpm-lock.yaml": ""}))
    assert (found.package_manager, found.evidence["package-manager"]) == ("pnpm", "pnpm-lock.yaml")
    assert found.gates["test"] == "pnpm test"
