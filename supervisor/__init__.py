"""supervisor: AI coding CLIs as stateless, sandboxed workers."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("supervisor")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0.0.0+checkout"
