"""Export a recording (`rtloop record`) to XDF (Lab Streaming Layer's file format; read it with
pyxdf) or to NWB 2 (read it with pynwb).

>>> from rtloop.export import to_xdf, to_nwb
>>> to_xdf("out/eeg", "eeg.xdf")      # the samples, and the events as a marker stream
>>> to_nwb("out/eeg", "eeg.nwb")      # an ElectricalSeries (or TimeSeries) + an EventsTable

XDF is written by rtloop's Rust XDF implementation (the XDF 1.0 chunks: magic, FileHeader,
StreamHeader, Samples, StreamFooter), the same one ``rtloop replay`` reads XDF files with;
NWB goes through pynwb, installed on demand (``pip install pynwb``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

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


#: volts per unit of each voltage unit a stream may name
_VOLTS = {"V": 1.0, "mV": 1e-3, "uV": 1e-6, "µV": 1e-6, "μV": 1e-6, "nV": 1e-9}

#: content types (LSL's stream types) of electrode recordings
_EPHYS_TYPES = {"eeg", "ecog", "seeg", "ieeg", "lfp", "ephys", "ecephys", "emg", "extracellular"}


def _ephys_conversion(h: Dict[str, Any]) -> Optional[Tuple[float, List[float]]]:
    """For a recording of electrodes (an ephys content type, or every channel in a voltage
    unit): the conversion to volts common to all channels and the factor of each channel
    relative to it; ``None`` for any other recording."""
    n = int(h["n_channels"])
    units = list(h.get("ch_units") or [])
    volts = [_VOLTS.get(u) for u in units]
    ephys = str(h.get("content_type", "")).lower() in _EPHYS_TYPES
    if len(units) == n and n > 0 and all(v is not None for v in volts):
        base = min(v for v in volts if v is not None)
        # rounded: 1e-3 / 1e-6 is 1000.0000000000001 in floats
        return base, [round(float(v) / base, 9) for v in volts if v is not None]
    if ephys and not any(units):
        return 1e-6, [1.0] * n  # an electrode stream without units: microvolts, as EEG is
    return None


def to_nwb(recording: Union[str, os.PathLike[str], Recording], path: Union[str, os.PathLike[str]]) -> None:
    """Write the recording to an NWB 2 file with pynwb, times in seconds from the first
    sample (a regular stream recorded without a gap by ``starting_time`` and ``rate``, any
    other by each sample's time), events as an EventsTable (timestamp, annotation
    "type=value").

    A recording of electrodes (content type EEG, ECoG, sEEG, LFP, ephys, EMG, ..., or every
    channel in V, mV, uV or nV) is an ``ElectricalSeries`` with its electrodes table (one row
    per channel, with the channel's name as ``channel_name``), an electrode group and a device named
    after the stream's source: the samples are stored as recorded, and ``conversion``
    (with ``channel_conversion`` where the channels' units differ) turns them into volts, as
    NWB readers (pynwb, neo, SpikeInterface) expect. Any other recording is a ``TimeSeries``
    in its first channel's unit."""
    try:
        from datetime import datetime, timezone

        import pynwb  # type: ignore[import-untyped]
        from pynwb.ecephys import ElectricalSeries  # type: ignore[import-untyped]
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
    n_ch = int(h["n_channels"])
    names = [c or f"ch{i}" for i, c in enumerate(h["ch_names"] or [""] * n_ch)]
    description = str(h.get("description") or "") or f"rtloop stream {h['stream']}"
    conversion = _ephys_conversion(h)
    # a regular stream recorded without a gap is timed by its rate, as NWB readers expect of
    # regular sampling; else each sample keeps its own time
    sfreq = float(h.get("sfreq") or 0.0)
    timing: Dict[str, Any] = (
        {"starting_time": 0.0, "rate": sfreq}
        if sfreq > 0 and not h.get("gaps")
        else {"timestamps": np.asarray(rec.timestamps) - t0}
    )
    if conversion is None:
        nwb.add_acquisition(
            pynwb.TimeSeries(
                name=str(h["stream"]),
                data=np.asarray(rec.data),
                unit=(h["ch_units"][0] if h["ch_units"] and h["ch_units"][0] else "a.u."),
                **timing,
                description="channels: " + ", ".join(names),
            )
        )
    else:
        base, per_channel = conversion
        source = str(h.get("source_id") or "") or str(h["stream"])
        device = nwb.create_device(name=source, description=f"the source of rtloop stream {h['stream']}")
        group = nwb.create_electrode_group(
            name=f"{h['stream']}-electrodes", description=description, location="unknown", device=device
        )
        types = list(h.get("ch_types") or [])
        # `channel_name`: NeuroConv's column, which SpikeInterface takes as channel ids
        nwb.add_electrode_column(name="channel_name", description="the channel's name in the stream")
        nwb.add_electrode_column(name="channel_type", description="the channel's type in the stream ('' if none)")
        for i in range(n_ch):
            nwb.add_electrode(group=group, location="unknown", channel_name=names[i],
                              channel_type=types[i] if i < len(types) else "")
        region = nwb.create_electrode_table_region(list(range(n_ch)), "every channel of the stream")
        nwb.add_acquisition(
            ElectricalSeries(
                name=str(h["stream"]),
                data=np.asarray(rec.data),
                electrodes=region,
                conversion=base,
                channel_conversion=None if all(c == 1.0 for c in per_channel) else per_channel,
                **timing,
                description=description,
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
