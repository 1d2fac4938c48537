"""What rtloop's replay needs of an NWB file, read with pynwb: run by `rtloop replay FILE.nwb`
as ``python -m rtloop._nwb_plan FILE SERIES OUT`` (the Rust side is rtloop-record's NWB
format).

Prints one JSON object: {"series": [every replayable series], "plan": {...} or null}. The plan
of the picked series says where its samples are: in the NWB file itself at a byte offset when
the dataset is stored contiguously and uncompressed (replay maps it, no copy), else in
OUT/data.bin, copied here block by block; and its rate (or OUT/stamps.bin, u64 ns per sample,
for a series with timestamps), channel names, units, gains and offsets, and events at rows.
"""

import json
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

DTYPES = {
    "int8": "int8", "uint8": "uint8", "int16": "int16", "uint16": "uint16", "int32": "int32",
    "uint32": "uint32", "int64": "int64", "uint64": "uint64", "float32": "float32",
    "float64": "float64",
}
VOLTS = ("volts", "volt", "v")


def replayable(obj: Any) -> bool:
    from pynwb import TimeSeries  # type: ignore[import-untyped]
    from pynwb.misc import AnnotationSeries  # type: ignore[import-untyped]

    if not isinstance(obj, TimeSeries) or isinstance(obj, AnnotationSeries):
        return False
    d = obj.data
    return hasattr(d, "dtype") and d.dtype.kind in "iuf" and len(d.shape) in (1, 2)


def all_series(nwb: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}

    def add(prefix: str, name: str, obj: Any) -> None:
        if replayable(obj):
            out[prefix + name] = obj
        for attr in ("electrical_series", "time_series"):
            inner = getattr(obj, attr, None)
            if isinstance(inner, dict):
                for k, s in inner.items():
                    if replayable(s):
                        out[f"{prefix}{name}/{k}"] = s

    for name, obj in nwb.acquisition.items():
        add("", name, obj)
    for mname, mod in nwb.processing.items():
        for name, obj in mod.data_interfaces.items():
            add(f"processing/{mname}/", name, obj)
    return out


def pick(names: List[str], wanted: Optional[str]) -> Optional[str]:
    if wanted is None:
        return names[0] if len(names) == 1 else None
    if wanted in names:
        return wanted
    tail = [n for n in names if n.endswith("/" + wanted)]
    return tail[0] if len(tail) == 1 else None


def text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (list, tuple, np.ndarray)):
        return ",".join(text(x) for x in v)
    return str(v)


def events_of(nwb: Any, row_of: Callable[[float], int]) -> List[Dict[str, Any]]:
    """Interval tables (trials, epochs, ...), annotation series and events tables."""
    evs: List[Dict[str, Any]] = []
    skip = {"start_time", "stop_time", "timeseries", "timestamp", "duration", "id"}

    def label_column(table: Any) -> Optional[str]:
        for c in table.colnames:
            if c in skip:
                continue
            vals = table[c][:]
            if len(vals) and isinstance(vals[0], (str, bytes, list, np.ndarray)):
                return str(c)
        return None

    for tname, table in (nwb.intervals or {}).items():
        col = label_column(table)
        starts, stops = table["start_time"][:], table["stop_time"][:]
        labels = table[col][:] if col else table.id[:]
        for t0, t1, lab in zip(starts, stops, labels):
            r0, r1 = row_of(float(t0)), row_of(float(t1))
            evs.append({"row": r0, "type": tname, "value": text(lab), "duration": max(r1 - r0, 0)})
    from pynwb.misc import AnnotationSeries

    for name, obj in list(nwb.acquisition.items()) + list(nwb.stimulus.items()):
        if isinstance(obj, AnnotationSeries):
            ts = obj.timestamps[:] if obj.timestamps is not None else []
            for t, d in zip(ts, obj.data[:]):
                evs.append({"row": row_of(float(t)), "type": name, "value": text(d), "duration": 0})
    for tname, table in (getattr(nwb, "events", None) or {}).items():
        col = label_column(table)
        ts = table["timestamp"][:]
        durs = table["duration"][:] if "duration" in table.colnames else [0.0] * len(ts)
        labels = table[col][:] if col else table.id[:]
        for t, d, lab in zip(ts, durs, labels):
            r0 = row_of(float(t))
            d = 0.0 if d is None or not np.isfinite(d) else float(d)
            evs.append({"row": r0, "type": tname, "value": text(lab), "duration": max(row_of(float(t) + d) - r0, 0)})
    return evs


def plan(path: str, s: Any, name: str, out: str) -> Tuple[Dict[str, Any], Callable[[float], int]]:
    data = s.data
    dt = np.dtype(data.dtype)
    if dt.name not in DTYPES:
        raise SystemExit(json.dumps({"error": f"series {name}: dtype {dt} is not one a stream holds"}))
    rows = int(data.shape[0])
    nch = int(data.shape[1]) if len(data.shape) == 2 else 1
    little = dt.byteorder in ("<", "=", "|")
    offset = None
    try:
        if data.chunks is None and data.compression is None and little:
            offset = data.id.get_offset()
    except Exception:
        offset = None
    if offset is None and rows > 0:
        file, offset = os.path.join(out, "data.bin"), 0
        step = max(1, (64 << 20) // max(1, nch * dt.itemsize))
        with open(file, "wb") as f:
            for i in range(0, rows, step):
                np.ascontiguousarray(data[i:i + step], dtype=dt.newbyteorder("<")).tofile(f)
    elif offset is None:
        file, offset = path, 0
    else:
        file = path
    stamps = None
    if s.rate is not None:
        rate, t0 = float(s.rate), float(s.starting_time or 0.0)

        def row_of(t: float) -> int:
            return int(round((t - t0) * rate))
    else:
        ts = np.asarray(s.timestamps[:], dtype=np.float64)
        t0 = float(ts[0]) if len(ts) else 0.0
        rate = float((len(ts) - 1) / (ts[-1] - ts[0])) if len(ts) > 1 and ts[-1] > ts[0] else 0.0
        stamps = os.path.join(out, "stamps.bin")
        np.round((ts - t0) * 1e9).astype("<u8").tofile(stamps)

        def row_of(t: float) -> int:
            return int(np.searchsorted(ts, t - 1e-12))
    names = [f"ch{i}" for i in range(nch)]
    electrodes = getattr(s, "electrodes", None)
    if electrodes is not None:
        idx = np.asarray(electrodes.data[:])
        table = electrodes.table
        if "channel_name" in table.colnames:
            col = table["channel_name"][:]
            names = [text(col[i]) for i in idx]
        else:
            ids = table.id[:]
            names = [str(ids[i]) for i in idx]
    conversion = float(s.conversion)
    cc = getattr(s, "channel_conversion", None)
    per = [float(x) for x in cc[:]] if cc is not None else [1.0] * nch
    gains = [conversion * c for c in per]
    offsets = [float(getattr(s, "offset", 0.0) or 0.0)] * nch
    unit = str(s.unit)
    if unit.lower() in VOLTS:
        gains = [g * 1e6 for g in gains]
        offsets = [o * 1e6 for o in offsets]
        unit = "uV"
    return {
        "file": os.path.abspath(file),
        "offset": int(offset),
        "dtype": DTYPES[dt.name],
        "rows": rows,
        "n_channels": nch,
        "rate": rate,
        "stamps": stamps,
        "ch_names": names,
        "ch_units": [unit] * nch,
        "gains": gains,
        "offsets": offsets,
        "neurodata_type": type(s).__name__,
    }, row_of


def main(path: str, wanted: Optional[str], out: str) -> None:
    try:
        from pynwb import NWBHDF5IO
    except ImportError:
        raise SystemExit(json.dumps({"error": "pynwb is not installed in this Python (pip install pynwb)"}))
    with NWBHDF5IO(path, "r", load_namespaces=True) as io:
        nwb = io.read()
        series = all_series(nwb)
        names = list(series)
        name = pick(names, wanted)
        result: Dict[str, Any] = {"series": names, "plan": None}
        if name is not None:
            p, row_of = plan(path, series[name], name, out)
            p["series"] = name
            p["events"] = sorted(
                (e for e in events_of(nwb, row_of) if 0 <= e["row"] < p["rows"]), key=lambda e: e["row"]
            )
            result["plan"] = p
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] or None, sys.argv[3])
