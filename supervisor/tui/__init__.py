"""The approval and monitoring TUI (`supervisor tui`); Textual is imported only in app.py."""
