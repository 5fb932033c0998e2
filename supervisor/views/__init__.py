"""What a person sees of a task, shared by every face (the CLI, the TUI): the detail of a
workflow, its work tree, listings and tables fitted to a terminal.
"""
