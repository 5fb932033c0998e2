"""`python -m supervisor` runs the command line."""

from supervisor.cli.entry import main

main()
