"""Recorded files played into live streams (``rtloop replay``), and the gains of the streams
replay makes.

:func:`play` runs the library code ``rtloop replay`` runs, on a thread of this process that
never needs the GIL, and returns once the streams exist::

    with rtloop.replay.play("run1_g0_t0.imec0.ap.bin", stream="ap", speed=1.0) as r:
        reader = rtloop.Stream.open("ap").reader(mode="lossless")
        ...                              # samples arrive at the original pace
    print(r.reports[0].samples)

The samples go into the stream as the file stores them (int16 stays int16, bit for bit); each
channel's gain and offset to its physical unit (``Stream.ch_units``: ``"uV"``, ``"V"``, or
empty for bit fields such as a sync channel) are in the stream's description. :func:`scale`
gives them as arrays::

    s = rtloop.Stream.open("imec0.ap")
    gain, offset = rtloop.replay.scale(s)
    uv = raw * gain + offset             # raw: samples read from the stream
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
from numpy.typing import NDArray

from ._checks import check_type
from .reports import ReplayReport
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


class Replay:
    """A replay running in this process: ``streams`` (one per series) are being written.
    ``wait()`` waits for the end of the file, ``stop()`` ends it early (what was written stays)
    and returns the reports, one `rtloop.reports.ReplayReport` per series (what ``rtloop replay
    --json`` prints); used as a context manager it stops on exit and keeps them in
    ``reports``."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self.reports: Optional[List[ReplayReport]] = None

    @property
    def streams(self) -> List[str]:
        return list(self._session.streams)

    @property
    def running(self) -> bool:
        return bool(self._session.running)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait until every series has played, at most ``timeout`` seconds; True if done."""
        return bool(self._session.wait(timeout))

    def stop(self) -> List[ReplayReport]:
        """Stop (if still playing), wait, and return the reports; raises the error the replay
        failed with."""
        self.reports = [ReplayReport.of(r) for r in self._session.stop()]
        return self.reports

    def __enter__(self) -> "Replay":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<rtloop.replay.Replay {', '.join(self.streams)} ({'playing' if self.running else 'ended'})>"


def play(
    path: Union[str, "os.PathLike[str]"],
    *,
    series: Union[None, str, Sequence[str]] = None,
    all: bool = False,
    stream: Optional[str] = None,
    speed: Optional[float] = 1.0,
    capacity: Optional[int] = None,
    keep: bool = False,
) -> Replay:
    """Play a recorded file into live streams (``rtloop replay PATH``): an rtloop recording,
    XDF, SpikeGLX (.bin + .meta), Open Ephys binary or NWB. ``series`` picks the series (one
    name or several, each into its own stream), ``all=True`` plays every one; ``stream`` names
    the stream (one series only). ``speed`` is a multiple of the original pace, ``None`` as
    fast as possible. Samples go in bit for bit, events at their samples. A stream ends with
    its replay (readers attached read it to the end; nobody finds it afterwards) unless
    ``keep=True``.

    Everything is opened and checked before anything plays: a file that cannot be read is
    ``OSError``, one rtloop cannot play, a series it does not hold or a bad stream name
    ``ValueError`` naming what there is."""
    from ._rtloop import ReplaySession

    names = [] if series is None else [series] if isinstance(series, str) else list(series)
    check_type(keep, bool, "keep")
    return Replay(ReplaySession(os.fspath(path), names, bool(all), stream, speed, capacity, keep))
