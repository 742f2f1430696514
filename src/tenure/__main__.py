"""``python -m tenure``: the same command line as the ``tenure`` entry point."""

from tenure.cli import main

main()
