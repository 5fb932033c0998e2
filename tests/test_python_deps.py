"""Every dependency a Python project declares is found, read as data and never executed."""

from __future__ import annotations

import json
from pathlib import Path

from supervisor.project.python_deps import read

FIXTURES = Path(__file__).parent / "fixtures"


def make(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_setup_py_is_read_through_ast_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    repo = make(
        tmp_path / "repo",
        {
            "setup.py": "import pathlib\n"
            f"pathlib.Path({str(marker)!r}).write_text('executed')\n"
            "from setuptools import setup\n"
            "base = ['requests>=2', 'click']\n"
            "setup(name='x', install_requires=base + ['attrs'],\n"
            "      extras_require={'yaml': ['PyYAML']}, tests_require=['pytest-mock'])\n"
        },
    )
    deps = read(repo)
    assert deps.requirements == ["requests>=2", "click", "attrs", "PyYAML", "pytest-mock"]
    assert not marker.exists()


def test_the_fixture_package_declares_its_dependency_only_in_setup_py() -> None:
    deps = read(FIXTURES / "py_slugger")
    assert "text-unidecode>=1.3" in deps.requirements
    assert "setup.py install_requires" in deps.sources


def test_pyproject_groups_and_tool_tables(tmp_path: Path) -> None:
    repo = make(
        tmp_path,
        {
            "pyproject.toml": '[project]\nname = "app"\ndependencies = ["httpx>=0.27"]\n'
            '[project.optional-dependencies]\ncli = ["rich"]\n'
            '[dependency-groups]\ntest = ["pytest>=8", {include-group = "lint"}]\nlint = ["ruff"]\n'
            '[tool.poetry.group.dev.dependencies]\nfreezegun = "^1.5"\npython = "^3.11"\n'
            '[tool.pdm.dev-dependencies]\ndocs = ["mkdocs"]\n'
            '[tool.hatch.envs.default]\ndependencies = ["coverage"]\n'
            '[tool.hatch.envs.lint]\ndependencies = ["black"]\n'
        },
    )
    deps = read(repo)
    assert deps.requirements == [
        "httpx>=0.27",
        "rich",
        "pytest>=8",
        "ruff",
        "freezegun",
        "mkdocs",
        "coverage",
    ]


def test_setup_cfg_and_requirements_with_includes(tmp_path: Path) -> None:
    repo = make(
        tmp_path,
        {
            "setup.cfg": "[options]\ninstall_requires =\n    six>=1.16\n    idna\n"
            "[options.extras_require]\ntest =\n    pytest\n",
            "requirements-dev.txt": "-r requirements/base.txt\n-e .\n./local-wheel\n"
            "-c constraints.txt\n--extra-index-url https://example.org/simple\nblack==24.1 # fmt\n",
            "requirements/base.txt": "urllib3<3\n",
            "constraints.txt": "urllib3==2.2.1\n",
        },
    )
    deps = read(repo)
    assert deps.requirements == [
        "six>=1.16",
        "idna",
        "pytest",
        "urllib3<3",
        "--extra-index-url https://example.org/simple",
        "black==24.1",
    ]
    assert deps.constraints == ["urllib3==2.2.1"]  # from -c, once, though reached twice


def test_lock_files_pin_versions_as_constraints(tmp_path: Path) -> None:
    repo = make(
        tmp_path,
        {
            "pyproject.toml": '[tool.poetry]\nname = "app"\n'
            '[tool.poetry.dependencies]\npython = "^3.11"\nrequests = "^2.31"\n'
            'lib = {path = "../lib"}\n',
            "poetry.lock": '[[package]]\nname = "requests"\nversion = "2.31.0"\n'
            '[[package]]\nname = "idna"\nversion = "3.6"\n',
            "uv.lock": '[[package]]\nname = "app"\nversion = "0.1.0"\n'
            'source = { editable = "." }\n',
            "Pipfile.lock": json.dumps({"default": {"six": {"version": "==1.16.0"}}}),
        },
    )
    deps = read(repo)
    assert deps.requirements == ["requests"]  # python and the path dependency left out
    assert deps.constraints == ["six==1.16.0", "requests==2.31.0", "idna==3.6"]
    assert "poetry.lock" in deps.sources
