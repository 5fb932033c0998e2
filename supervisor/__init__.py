"""supervisor: AI coding CLIs as stateless, sandboxed workers."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """`__version__`, looked up when asked for: importing importlib.metadata costs every command
    ~0.05 s, and only `--version` needs it."""
    if name != "__version__":
        raise AttributeError(f"module 'supervisor' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("supervisor")
    except PackageNotFoundError:  # running from a checkout that was never installed
        return "0.0.0+checkout"
