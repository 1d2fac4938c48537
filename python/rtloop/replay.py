"""Streams made by ``rtloop replay`` from SpikeGLX, Open Ephys and NWB files.

The samples go into the stream as the file stores them (int16 stays int16, bit for bit); each
channel's gain and offset to its physical unit (``Stream.ch_units``: ``"uV"``, ``"V"``, or
empty for bit fields such as a sync channel) are in the stream's description. :func:`scale`
gives them as arrays::

    s = rtloop.Stream.open("imec0.ap")
    gain, offset = rtloop.replay.scale(s)
    uv = raw * gain + offset             # raw: samples read from the stream
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple, Union

import numpy as np
from numpy.typing import NDArray

from .stream import Stream, StreamInfo


def _expand(runs: List[Any], n: int, what: str) -> NDArray[np.float64]:
    out = np.concatenate([np.full(int(k), float(v)) for v, k in runs]) if runs else np.zeros(0)
    if len(out) != n:
        raise ValueError(f"the stream's description gives {what} for {len(out)} channels, it has {n}")
    return out


def scale(stream: Union[Stream, StreamInfo]) -> Tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(gain, offset)``, one per channel: physical value = raw × gain + offset, in the
    channel's unit. A stream whose description has no gains (not made by ``rtloop replay``
    from a file that has them) gets gain 1 and offset 0."""
    desc: Dict[str, Any] = stream.desc
    n = stream.n_channels
    gain = _expand(desc["gain"], n, "gains") if "gain" in desc else np.ones(n)
    offset = _expand(desc["offset"], n, "offsets") if "offset" in desc else np.zeros(n)
    return gain, offset
