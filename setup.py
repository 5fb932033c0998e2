"""Build step only (the metadata is in pyproject.toml): the wheel carries copies of the top-level
`config/`, `prompts/`, `sandbox/`, `scripts/setup.sh` and the npm lock files in
`supervisor/_data/`, so a non-editable install has them. The top-level folders stay the source of
truth; supervisor/core/resources.py finds either layout."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
SHIPPED = [
    "config",
    "prompts",
    "sandbox/Dockerfile",
    "sandbox/entrypoint.sh",
    "sandbox/gemini.sh",
    "sandbox/stage_node_modules.py",
    "scripts/setup.sh",
    "scripts/register-runsc.sh",
    "package.json",
    "package-lock.json",
]


class BuildWithData(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "supervisor" / "_data"
        shutil.rmtree(target, ignore_errors=True)
        for name in SHIPPED:
            source, dest = ROOT / name, target / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(source, dest)


setup(cmdclass={"build_py": BuildWithData})
