"""Reading recordings made by `rtloop record` (one directory per stream).

>>> rec = rtloop.load("out/eeg")           # or rtloop.load("out") if it holds one stream
>>> rec.data.shape                          # numpy.memmap (samples, channels), no copy
>>> rec.timestamps                          # CLOCK_MONOTONIC seconds of each sample
>>> rec.events, rec.header["ch_names"]

The sample count comes from the file sizes, so a recording cut by kill -9 or a power loss loads
up to its last whole sample; ``rec.complete`` says whether it ended cleanly. The data file is
flat little-endian sample-major, so this also works without rtloop:
``numpy.memmap("out/eeg/data.bin", dtype=header["dtype"]).reshape(-1, header["n_channels"])``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np
from numpy.typing import NDArray

from ._rtloop import RecordingFiles, recording_gaps, recording_row_of, recording_sample_of
from .reports import RecordReport

__all__ = ["Recording", "Recorder", "load", "record", "row_of"]


def row_of(header: Mapping[str, Any], sample: int) -> Tuple[int, bool]:
    """The row of ``data.bin`` for stream sample ``sample``: ``(row, True)`` if that sample was
    recorded there, ``(row, False)`` if it was not (lost in a gap, or before the first recorded
    sample), with ``row`` the first recorded row after it.

    ``header`` is a recording's header (or a mapping with just its first sample and gaps).
    The mapping is the Rust recorder's own (``rtloop_record::row_of``): row ``r`` holds
    sample ``first_sample + r`` plus the samples lost in every gap at a row ``<= r``.
    """
    return recording_row_of(header, sample)


@dataclass
class Recording:
    """A recording opened for reading."""

    path: Path
    header: Dict[str, Any]
    data: NDArray[Any]
    timestamps: NDArray[np.float64]
    events: List[Dict[str, Any]]

    @property
    def complete(self) -> bool:
        """It ended cleanly (False: it was cut, or is still being written)."""
        return bool(self.header.get("complete"))

    @property
    def lost_samples(self) -> int:
        """Samples the recorder lost because the stream lapped it."""
        return int(self.header.get("lost_samples", 0))

    @property
    def lost_events(self) -> int:
        """Events the recorder lost because the stream's event ring lapped it."""
        return int(self.header.get("lost_events", 0))

    def row_of(self, sample: int) -> Tuple[int, bool]:
        """The row for stream sample ``sample`` (see :func:`row_of`)."""
        return row_of(self.header, sample)

    def sample_of(self, row: int) -> int:
        """The stream sample index held by row ``row`` (the inverse of :meth:`row_of`)."""
        return recording_sample_of(self.header, row)

    @property
    def gaps(self) -> List[Tuple[int, int]]:
        """Where the recorder was lapped: ``(row right after the gap, samples lost there)``."""
        return recording_gaps(self.header)

    @property
    def sfreq(self) -> float:
        return float(self.header["sfreq"])

    @property
    def ch_names(self) -> List[str]:
        return list(self.header["ch_names"])

    @property
    def ch_types(self) -> List[str]:
        """Channel types the stream had (empty if none were given)."""
        return list(self.header.get("ch_types", []))

    def to_mne(self) -> Any:
        """The recording as an ``mne.io.RawArray`` (needs ``mne``).

        Channel names and types come from the stream (channels without an MNE type become
        ``misc``); volts, millivolts, microvolts and nanovolts are scaled to volts; each
        event becomes an annotation ``"type=value"`` at the row holding its sample, and each
        gap where the recorder was lapped a ``BAD_ACQ_SKIP`` annotation at the row after it.
        """
        from ._mne import event_text, raw_array

        sfreq = self.sfreq
        n = self.data.shape[0]
        annotations = []
        for e in self.events:
            row, _ = self.row_of(int(e["sample"]))
            if row < n and sfreq > 0:
                duration = float(e.get("duration", 0)) / sfreq
                annotations.append((row / sfreq, duration, event_text(e["type"], e["value"])))
        for at, lost in self.gaps:
            if at < n and sfreq > 0:
                annotations.append((at / sfreq, 0.0, f"BAD_ACQ_SKIP {lost} samples lost"))
        annotations.sort()
        return raw_array(self.data, sfreq, self.ch_names, self.ch_types,
                         list(self.header.get("ch_units", [])), annotations)

    def __repr__(self) -> str:
        return (
            f"<rtloop.Recording {self.header['stream']!r}: {self.data.shape[0]} samples x "
            f"{self.data.shape[1]} {self.header['dtype']}, {len(self.events)} events"
            f"{'' if self.complete else ', cut short'}"
            f"{f', {self.lost_samples} samples lost' if self.lost_samples else ''}"
            f"{f', {self.lost_events} events lost' if self.lost_events else ''}>"
        )


def load(path: Union[str, os.PathLike[str]]) -> Recording:
    """Open a recording directory (``OUT/STREAM``, or ``OUT`` when it holds exactly one).

    The Rust recorder's reader finds the directory, checks and reads the header, counts the
    whole samples the files hold and reads the events up to a line cut by a crash
    (FileNotFoundError: no recording there, naming those inside; ValueError: a damaged or
    foreign header); this maps the files with numpy, without copying the samples.
    """
    files = RecordingFiles(os.fspath(path))
    header: Dict[str, Any] = files.header
    p, n = Path(files.dir), files.rows
    dtype = np.dtype(header["dtype"]).newbyteorder("<")
    nch = int(header["n_channels"])
    data: NDArray[Any] = (
        np.memmap(p / "data.bin", dtype=dtype, mode="r", shape=(n, nch)) if n else np.zeros((0, nch), dtype)
    )
    stamps = (
        np.memmap(p / "timestamps.bin", dtype="<u8", mode="r", shape=(n,)) if n else np.zeros(0, "<u8")
    )
    return Recording(p, header, data, np.asarray(stamps, dtype=np.float64) * 1e-9, files.events)


class Recorder:
    """Streams being recorded, as `rtloop record` does (the same library: one thread per
    stream in this process, none of which needs the GIL, so Python code beside never slows
    them down). ``stop()`` ends it cleanly and returns its report, one dict per stream.
    With ``control=PATH`` it also listens on the UNIX socket PATH for ``rtloop record
    --control``'s commands (``status``, ``start``, ``pause``, ``split``, ``stop``; one line
    back each), removed again by ``stop()``."""

    def __init__(
        self,
        streams: List[str],
        out: Union[str, "os.PathLike[str]"],
        seconds: Optional[float] = None,
        control: Optional[Union[str, "os.PathLike[str]"]] = None,
    ) -> None:
        from ._rtloop import RecordSession

        if isinstance(streams, str):
            streams = [streams]
        self.out = Path(out)
        # returns once every stream's recorder has its reader registered: nothing written
        # after this is missed (RuntimeError with the recorder's error if one ended first)
        self._session = RecordSession(
            list(streams), os.fspath(out), seconds, None if control is None else os.fspath(control)
        )

    @property
    def running(self) -> bool:
        return bool(self._session.running)

    def stop(self, timeout: float = 30.0) -> List[RecordReport]:
        """Stop every recorder (they close their files cleanly) and return the per-stream
        reports (`rtloop.reports.RecordReport`: fields as attributes, still dicts). ``timeout`` is kept for compatibility: a recorder stops within its flush
        interval."""
        return [RecordReport.of(r) for r in self._session.stop()]

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.running:
            self.stop()


def record(
    streams: Union[str, List[str]],
    out: Union[str, "os.PathLike[str]"],
    seconds: Optional[float] = None,
    control: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> Recorder:
    """Start recording ``streams`` into ``out`` (``out/<stream>/``); returns a `Recorder`
    whose ``stop()`` ends it. Use it as a context manager to stop on exit. ``control=PATH``
    serves the control socket of ``rtloop record --control`` at PATH while it records."""
    return Recorder([streams] if isinstance(streams, str) else list(streams), out, seconds, control)
