"""The ``rtloop`` console script: runs the ``rtloop`` executable that ships in the package
(``rtloop/_bin/rtloop``), so the native module that ``import rtloop`` loads does not link the
whole command line."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, NoReturn, Optional


def executable() -> Path:
    """The ``rtloop`` executable of this installation."""
    return Path(__file__).resolve().parent / "_bin" / "rtloop"


def missing_executable() -> str:
    """What to say when the package holds no ``rtloop`` executable."""
    return (
        f"rtloop: the rtloop executable is not in this installation (expected {executable()}); "
        "install a release wheel (pip install rtloop-*.whl), or build one from the source "
        "tree with scripts/wheel.sh"
    )


def main(argv: Optional[List[str]] = None) -> NoReturn:
    """Replace this process with ``rtloop`` and this process's arguments (same process id,
    so a parent that starts ``python -m rtloop child ...`` can signal and wait for it)."""
    args = sys.argv[1:] if argv is None else argv
    exe = executable()
    if not os.access(exe, os.X_OK):
        print(missing_executable(), file=sys.stderr)
        sys.exit(1)
    # Python modules (runtime models, benchmarks) run with the interpreter this command was
    # started with; the OS only knows the resolved one (outside any virtual environment).
    os.environ["RTLOOP_PYTHON"] = sys.executable
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, ["rtloop", *args])
