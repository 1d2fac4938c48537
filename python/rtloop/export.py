"""Export a recording (`rtloop record`) to XDF (Lab Streaming Layer's file format; read it with
pyxdf) or to NWB 2 (read it with pynwb).

>>> from rtloop.export import to_xdf, to_nwb
>>> to_xdf("out/eeg", "eeg.xdf")      # the samples, and the events as a marker stream
>>> to_nwb("out/eeg", "eeg.nwb")      # a TimeSeries of the samples + an EventsTable

The XDF writer is written here from the XDF 1.0 specification (magic, FileHeader, StreamHeader,
Samples, StreamFooter chunks); NWB goes through pynwb, installed on demand
(``pip install pynwb``).
"""

from __future__ import annotations

import os
import struct
from typing import Any, Dict, List, Union
from xml.sax.saxutils import escape

import numpy as np

from .recording import Recording, load

__all__ = ["to_xdf", "to_nwb"]

_XDF_FORMAT = {
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "float32": "float32", "float64": "double64",
}


def _varlen(n: int) -> bytes:
    if n < 256:
        return bytes([1, n])
    if n < 2**32:
        return b"\x04" + struct.pack("<I", n)
    return b"\x08" + struct.pack("<Q", n)


def _chunk(tag: int, content: bytes) -> bytes:
    return _varlen(len(content) + 2) + struct.pack("<H", tag) + content


def _stream_header(sid: int, name: str, kind: str, nch: int, srate: float, fmt: str, labels: List[str], units: List[str]) -> bytes:
    chans = "".join(
        f"<channel><label>{escape(labels[i] if i < len(labels) else f'ch{i}')}</label>"
        f"<unit>{escape(units[i] if i < len(units) else '')}</unit></channel>"
        for i in range(nch)
    )
    xml = (
        '<?xml version="1.0"?><info>'
        f"<name>{escape(name)}</name><type>{escape(kind)}</type><channel_count>{nch}</channel_count>"
        f"<nominal_srate>{srate}</nominal_srate><channel_format>{fmt}</channel_format>"
        f"<source_id>rtloop-{escape(name)}</source_id><version>1.1</version>"
        f"<created_at>0</created_at><uid>rtloop-{escape(name)}-{sid}</uid>"
        f"<desc><channels>{chans}</channels><acquisition><manufacturer>rtloop</manufacturer></acquisition></desc>"
        "</info>"
    )
    return _chunk(2, struct.pack("<I", sid) + xml.encode())


def _footer(sid: int, first: float, last: float, count: int) -> bytes:
    xml = (
        f'<?xml version="1.0"?><info><first_timestamp>{first}</first_timestamp>'
        f"<last_timestamp>{last}</last_timestamp><sample_count>{count}</sample_count></info>"
    )
    return _chunk(6, struct.pack("<I", sid) + xml.encode())


def to_xdf(recording: Union[str, os.PathLike[str], Recording], path: Union[str, os.PathLike[str]], *, chunk: int = 4096) -> None:
    """Write the recording to an XDF file: stream 1 holds the samples with their timestamps
    (CLOCK_MONOTONIC seconds), stream 2 (if there are events) a marker stream of the events
    as strings ``"type=value"`` at their samples' timestamps."""
    rec = recording if isinstance(recording, Recording) else load(recording)
    h = rec.header
    fmt = _XDF_FORMAT.get(h["dtype"])
    if fmt is None:
        raise ValueError(f"XDF has no {h['dtype']} channel format; allowed: {', '.join(_XDF_FORMAT)}")
    data = np.ascontiguousarray(rec.data, dtype=np.dtype(h["dtype"]).newbyteorder("<"))
    ts = np.asarray(rec.timestamps, dtype="<f8")
    n, nch = data.shape
    with open(path, "wb") as f:
        f.write(b"XDF:")
        f.write(_chunk(1, b'<?xml version="1.0"?><info><version>1.0</version></info>'))
        f.write(_stream_header(1, h["stream"], "rtloop", nch, float(h["sfreq"]), fmt, h["ch_names"], h["ch_units"]))
        for a in range(0, n, chunk):
            b = min(n, a + chunk)
            rows = [b"\x08" + struct.pack("<d", ts[i]) + data[i].tobytes() for i in range(a, b)]
            f.write(_chunk(3, struct.pack("<I", 1) + _varlen(b - a) + b"".join(rows)))
        if n:
            f.write(_footer(1, float(ts[0]), float(ts[-1]), n))
        events = rec.events
        if events:
            f.write(_stream_header(2, h["stream"] + "-events", "Markers", 1, 0.0, "string", ["event"], []))
            rows = []
            times = []
            for e in events:
                # the row holding the event's sample (the one mapping, gaps included); an
                # event on a lost sample gets the time of the next recorded sample
                i = min(rec.row_of(int(e["sample"]))[0], max(n - 1, 0))
                t = float(ts[i]) if n else float(e.get("stamp_ns", 0)) * 1e-9
                times.append(t)
                text = f"{e['type']}={e['value']}".encode()
                rows.append(b"\x08" + struct.pack("<d", t) + _varlen(len(text)) + text)
            f.write(_chunk(3, struct.pack("<I", 2) + _varlen(len(rows)) + b"".join(rows)))
            f.write(_footer(2, times[0], times[-1], len(rows)))


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
