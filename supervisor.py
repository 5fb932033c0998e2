"""Entry point for running from a checkout: `python supervisor.py ...`."""

from supervisor.cli.entry import main

if __name__ == "__main__":
    main()
