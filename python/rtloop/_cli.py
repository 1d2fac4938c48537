"""The ``rtloop`` console script: the Rust command line, run through the native module."""

from __future__ import annotations

import sys


def main() -> None:
    """Run ``rtloop`` with this process's arguments and exit with its exit code."""
    from ._rtloop import cli_main

    sys.exit(cli_main(sys.argv))
