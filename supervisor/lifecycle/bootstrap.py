"""`supervisor setup`: what scripts/setup.sh does, for an installed package too.

The setup script ships inside the package (supervisor/_data/scripts/setup.sh in a wheel) next to
the sandbox build files and the npm lock file, and stays the one implementation of the steps:
system packages, the Docker engine, the pinned npm tools, the base image and the sandbox image,
each skipped when its inputs have not changed, under a lock, failing with the step's name. Run
from here it skips the virtualenv step (this Python is already installed) and, outside a checkout,
puts the npm tools and caches in the per-user data directory (`resources.home()`), where the
packer and the token counter look for them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from supervisor.core import resources
from supervisor.core.errors import ToolFailedError, ToolMissingError


def run_setup(quiet: bool = False) -> None:
    """Run the shipped setup script, its progress on stderr; raises if a step fails."""
    script = resources.SETUP_SCRIPT
    if not script.is_file():
        raise ToolMissingError(
            f"The setup script is not in this installation ({script} is missing).",
            "Reinstall supervisor (pip install --force-reinstall) from a wheel built by setup.py.",
        )
    bash = shutil.which("bash")
    if bash is None:
        raise ToolMissingError(
            "`supervisor setup` runs a bash script; bash is not on PATH.", "Install bash."
        )
    env = {
        **os.environ,
        "SUPERVISOR_HOME": str(resources.home()),
        "SUPERVISOR_SETUP_SKIP_VENV": "1",
        "SUPERVISOR_PYTHON": sys.executable,
    }
    if quiet:
        env["SUPERVISOR_SETUP_QUIET"] = "1"
    # The script names its failing step and the fix on stderr, which the user sees as it runs.
    code = subprocess.run([bash, str(script)], env=env, stdin=subprocess.DEVNULL, check=False)
    if code.returncode != 0:
        raise ToolFailedError(
            f"Setup failed (exit {code.returncode}); the step and its cause are printed above.",
            "Apply the fix printed above and re-run `supervisor setup` (done steps are skipped).",
        )
