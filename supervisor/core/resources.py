"""Where the supervisor's own files are: in a source checkout, or inside an installed package.

A checkout (and its editable install) keeps `config/`, `prompts/`, `sandbox/`, `scripts/` and the
npm lock files at the repository root, and they stay the source of truth. A wheel (`pip install
.`, `pipx install .`) carries copies of them in `supervisor/_data/` (copied by setup.py's build
step), since nothing outside the package is installed. Every lookup goes through this module so
both layouts work the same way.

The npm tools (Repomix and the AI CLIs) are not in the wheel: a checkout has them in its own
`node_modules/`; an installed package gets them from `supervisor setup`, which runs `npm ci` with
the shipped lock file in the per-user data directory (`$SUPERVISOR_HOME`, default
`$XDG_DATA_HOME/supervisor` or `~/.local/share/supervisor`).
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # supervisor/, above this wing
CHECKOUT_ROOT = PACKAGE_DIR.parent
BUNDLED = PACKAGE_DIR / "_data"


def in_checkout() -> bool:
    """True when this package runs from a source checkout (plain or editable install)."""
    return (CHECKOUT_ROOT / "pyproject.toml").is_file() and (CHECKOUT_ROOT / "config").is_dir()


def data_root() -> Path:
    """The directory holding config/, prompts/, sandbox/, scripts/ and the npm lock files."""
    return CHECKOUT_ROOT if in_checkout() else BUNDLED


def home() -> Path:
    """The per-user directory for what an installed package sets up (npm tools, caches)."""
    configured = os.environ.get("SUPERVISOR_HOME")
    if configured:
        return Path(configured)
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "share") / "supervisor"


def node_root() -> Path:
    """The directory whose node_modules/ holds the pinned Repomix and CLIs."""
    return CHECKOUT_ROOT if in_checkout() else home() / "node"


def cache_dir() -> Path:
    return CHECKOUT_ROOT / ".cache" if in_checkout() else home() / "cache"


CONFIG_DIR = data_root() / "config"
PROMPTS_DIR = data_root() / "prompts"
SANDBOX_DIR = data_root() / "sandbox"
SETUP_SCRIPT = data_root() / "scripts" / "setup.sh"
NODE_MODULES = node_root() / "node_modules"
NODE_BIN = NODE_MODULES / ".bin"


def setup_command() -> str:
    """The command that installs what supervisor runs on, as this installation was made: a
    source checkout runs its own script, a package install (pip, pipx) the `setup` command.
    A fix names the one the user can run, not both."""
    if in_checkout():
        return f"bash {CHECKOUT_ROOT / 'scripts' / 'setup.sh'}"
    return "supervisor setup"
