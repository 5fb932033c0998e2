"""The user guide: README.md is a page a newcomer reads in minutes, docs/ holds the rest as a
MkDocs site, and neither may drift (a broken link, a page left out of the nav, a setting the
reference does not list)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
SETUP_AND_DEMO = "    bash scripts/setup.sh && .venv/bin/supervisor demo\n"
TESTS = "    bash scripts/test.sh\n"


def _docs_pages() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_pages", ROOT / "scripts" / "docs_pages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_fits_five_minutes_and_keeps_its_two_set_up_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    assert readme.count(SETUP_AND_DEMO) == 1 and readme.count(TESTS) == 1
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("exec bash scripts/test.sh")


def test_the_generated_pages_are_current() -> None:
    stale = [
        str(path.relative_to(ROOT))
        for path, text in _docs_pages().pages().items()
        if not path.exists() or path.read_text() != text
    ]
    assert not stale, f"run: .venv/bin/python scripts/docs_pages.py (stale: {stale})"


def test_the_configuration_reference_names_every_setting() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    for key in ("`limits.step_timeout_seconds`", "`sandbox.runtime`", "`budgets.task.usd`"):
        assert key in page


def test_the_guide_builds_with_no_broken_link_and_no_page_left_out(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert (tmp_path / "site" / "configuration" / "index.html").exists()
