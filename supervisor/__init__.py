"""supervisor: AI coding CLIs as stateless, sandboxed workers."""

__version__ = "0.1.0"
