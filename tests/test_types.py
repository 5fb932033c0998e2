"""The package type-checks under `mypy --strict` (configured in pyproject.toml's [tool.mypy]).

`make lint` runs the same check; this spec makes CI run it too, since CI runs the test suite.
mypy's cache is kept outside the checkout (one per user and Python version), so a fresh clone,
as CI makes, checks in a few seconds instead of 20-35: mypy reuses a cached module only when its
source's hash matches, whatever the file's path or time stamp.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "supervisor-tests"
    / f"mypy-py{sys.version_info.major}.{sys.version_info.minor}"
)


def test_the_package_type_checks_strictly() -> None:
    assert importlib.util.find_spec("mypy") is not None, (
        "mypy is not installed in this environment; run scripts/setup.sh (or pip install -r "
        "requirements.txt), which installs the pinned version"
    )
    result = subprocess.run(
        # what to check and how strictly: pyproject.toml
        [sys.executable, "-m", "mypy", "--cache-dir", str(CACHE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"mypy --strict found errors:\n{result.stdout}{result.stderr}"
    assert "no issues found" in result.stdout
