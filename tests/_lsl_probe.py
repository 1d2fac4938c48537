"""A handshake for tests that push into an LSL outlet: push probe samples until the inlet
has the connection, then compare what came after them."""

from __future__ import annotations

import time
from typing import Any, List

import numpy as np


def push_until_flowing(w: Any, inlet: Any, probe: np.ndarray) -> int:
    """liblsl hands an inlet only what is pushed after its outlet took the connection, which
    may come after `open_stream` returned: push single `probe` samples until one arrives (a
    handshake, not a sleep that a loaded machine may outlast). Returns how many were pushed;
    those still in flight arrive before anything pushed next."""
    deadline = time.monotonic() + 30
    pushed = 0
    while True:
        assert time.monotonic() < deadline, "no probe sample reached the inlet within 30 s"
        w.push_chunk(probe)
        pushed += 1
        chunk, _ = inlet.pull_chunk(timeout=0.05)
        if chunk:
            return pushed


def without_probes(got: List[Any], probe: np.ndarray, dtype: Any) -> np.ndarray:
    """What `inlet` received after the probes: the leading probe rows dropped."""
    rows = np.concatenate([np.asarray(c, dtype=dtype) for c in got])
    k = 0
    while k < len(rows) and (rows[k] == probe).all():
        k += 1
    return rows[k:]
