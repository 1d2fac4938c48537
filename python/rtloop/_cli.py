"""The ``rtloop`` console script: the Rust command line, run through the native module."""

from __future__ import annotations

import os
import sys


def main() -> None:
    """Run ``rtloop`` with this process's arguments and exit with its exit code."""
    from ._rtloop import cli_main

    # Child processes re-run the command as `<this python> -m rtloop`. The OS only knows the
    # resolved interpreter (outside any virtual environment), so say which one this is.
    os.environ["RTLOOP_PYTHON"] = sys.executable

    sys.exit(cli_main(sys.argv))
