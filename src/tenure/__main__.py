"""``python -m tenure``: the same command line as the ``tenure`` entry point (docs/operations.md)."""

from tenure.cli import main

main()
