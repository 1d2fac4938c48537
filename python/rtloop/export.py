"""Export a recording (`rtloop record`) to XDF (Lab Streaming Layer's file format; read it with
pyxdf) or to NWB 2 (read it with pynwb).

>>> from rtloop.export import to_xdf, to_nwb
>>> to_xdf("out/eeg", "eeg.xdf")      # the samples, and the events as a marker stream
>>> to_nwb("out/eeg", "eeg.nwb")      # a TimeSeries of the samples + an EventsTable

XDF is written by rtloop's Rust XDF implementation (the XDF 1.0 chunks: magic, FileHeader,
StreamHeader, Samples, StreamFooter), the same one ``rtloop replay`` reads XDF files with;
NWB goes through pynwb, installed on demand (``pip install pynwb``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Union

import numpy as np

from .recording import Recording, load

__all__ = ["to_xdf", "to_nwb"]


def to_xdf(recording: Union[str, os.PathLike[str], Recording], path: Union[str, os.PathLike[str]], *, chunk: int = 4096) -> None:
    """Write the recording to an XDF file: stream 1 holds the samples with their timestamps
    (CLOCK_MONOTONIC seconds), stream 2 (if there are events) a marker stream of the events
    as strings ``"type=value"`` at their samples' timestamps. The writer is rtloop's one XDF
    implementation (Rust, the same ``rtloop replay`` reads with); it streams the recording in
    blocks of ``chunk`` samples, so recordings larger than memory are fine."""
    from ._rtloop import xdf_from_recording

    directory = recording.path if isinstance(recording, Recording) else Path(recording)
    xdf_from_recording(os.fspath(directory), os.fspath(path), chunk)


def to_nwb(recording: Union[str, os.PathLike[str], Recording], path: Union[str, os.PathLike[str]]) -> None:
    """Write the recording to an NWB 2 file with pynwb: the samples as an acquisition
    TimeSeries (timestamps in seconds from the start), channel names in its description, and
    the events as an EventsTable (timestamp, annotation "type=value")."""
    try:
        from datetime import datetime, timezone

        import pynwb  # type: ignore[import-untyped]
    except ImportError as e:
        raise ImportError("NWB export needs pynwb: pip install pynwb") from e
    rec = recording if isinstance(recording, Recording) else load(recording)
    h: Dict[str, Any] = rec.header
    start = datetime.fromtimestamp(int(h["start_unix_ns"]) * 1e-9, tz=timezone.utc)
    nwb = pynwb.NWBFile(
        session_description=f"rtloop recording of stream {h['stream']}",
        identifier=f"rtloop-{h['stream']}-{h['start_unix_ns']}",
        session_start_time=start,
    )
    t0 = float(rec.timestamps[0]) if len(rec.timestamps) else 0.0
    nwb.add_acquisition(
        pynwb.TimeSeries(
            name=str(h["stream"]),
            data=np.asarray(rec.data),
            unit=(h["ch_units"][0] if h["ch_units"] else "a.u."),
            timestamps=np.asarray(rec.timestamps) - t0,
            description="channels: " + ", ".join(h["ch_names"] or [f"ch{i}" for i in range(int(h["n_channels"]))]),
        )
    )
    if rec.events:
        n = len(rec.timestamps)
        # the row holding each event's sample (the one mapping, gaps included)
        times = [float(rec.timestamps[min(rec.row_of(int(e["sample"]))[0], n - 1)]) - t0 if n else 0.0 for e in rec.events]
        table = nwb.create_events_table(
            name="events",
            description="rtloop stream events; time in seconds from the first sample, text type=value",
            source_description="rtloop stream event ring",
        )
        table.add_column(name="annotation", description="type=value")
        for t, ev in zip(times, rec.events):
            table.add_row(timestamp=t, annotation=f"{ev['type']}={ev['value']}")
    with pynwb.NWBHDF5IO(str(path), "w") as io:
        io.write(nwb)
