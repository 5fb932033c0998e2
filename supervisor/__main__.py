"""`python -m supervisor` runs the command line."""

from supervisor.cli.app import main

main()
