"""The package type-checks under `mypy --strict` (configured in pyproject.toml's [tool.mypy]).

`make lint` runs the same check; this spec makes CI run it too, since CI runs the test suite.
mypy keeps its cache in .mypy_cache, so a re-run after a small change takes a few seconds.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_package_type_checks_strictly() -> None:
    assert importlib.util.find_spec("mypy") is not None, (
        "mypy is not installed in this environment; run scripts/setup.sh (or pip install -r "
        "requirements.txt), which installs the pinned version"
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy"],  # what to check and how strictly: pyproject.toml
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"mypy --strict found errors:\n{result.stdout}{result.stderr}"
    assert "no issues found" in result.stdout
