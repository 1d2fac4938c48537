"""Optional peers of the test suite (pylsl, brainflow, pynwb, pyxdf, numba, scipy, FieldTrip.py).

Locally a missing peer skips the tests that need it. In CI (``RTLOOP_REQUIRE_PEERS=1``, set
by ``scripts/test-all.sh``, whose environment ``scripts/python-dev.sh`` builds with every
peer) a missing peer fails the run instead, naming the package and the command that
installs it: a skipped module there would hide untested code.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

INSTALL = "bash scripts/python-dev.sh"


def required() -> bool:
    """Whether a missing peer is a failure (CI) rather than a skip (local runs)."""
    return os.environ.get("RTLOOP_REQUIRE_PEERS", "0") == "1"


def need(module: str, package: str) -> ModuleType:
    """Import ``module`` (from PyPI package ``package``), or skip / fail as above."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        why = f"{module} is not importable ({e}); it comes from the PyPI package {package!r}, installed by `{INSTALL}`"
        if required():
            pytest.fail(f"RTLOOP_REQUIRE_PEERS=1: {why}", pytrace=False)
        pytest.skip(why)
        raise  # unreachable: skip raises
