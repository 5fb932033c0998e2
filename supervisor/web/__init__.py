"""`supervisor web`: the dashboard in a browser, a face over the same state and lifecycle as the
command line and the TUI (docs/web.md)."""
