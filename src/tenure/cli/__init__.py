"""The ``tenure`` command line (``pip install 'tenure[cli]'``).

``tenure demo`` runs contending processes on an embedded server; ``tenure status``, ``list``,
``force-release``, ``run`` and ``doctor`` are for operators (docs/operations.md). The commands need
click and rich, an extra of the package: without them, `main()` says how to install them
instead of failing with a traceback. ``python -m tenure.cli`` runs the same command line.
"""

from __future__ import annotations

import sys

INSTALL_HINT = (
    "tenure: the command line needs the 'cli' extra (click and rich): pip install 'tenure[cli]'"
    ", or pip install '.[cli]' in a checkout"
)


def main() -> None:
    """Entry point of the ``tenure`` command."""
    try:
        import click  # noqa: F401
        import rich  # noqa: F401
    except ImportError as error:
        print(f"{INSTALL_HINT} ({error})", file=sys.stderr)
        sys.exit(1)
    from tenure.cli.app import main as group

    group()
