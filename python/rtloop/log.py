"""The runtime's SQLite log (the `logger` sink, LiCoRICE's logger) read into numpy.

    >>> log = rtloop.load_log("spikes.db")
    >>> log.ticks["start_ns"]                   # one row per tick
    >>> log["spikes"].data.shape                # (ticks, 32): one row of the signal per tick
    >>> log["events"].rows                      # a variable signal: rows per tick, then data

Fixed signals come back as one array shaped ``(ticks, *shape)`` of the signal's dtype;
variable signals as their concatenated rows plus the number of rows each tick carried.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple, Union

import numpy as np
from numpy.typing import NDArray

__all__ = ["Log", "LoggedSignal", "load_log"]


@dataclass
class LoggedSignal:
    """One logged signal."""

    name: str
    dtype: np.dtype[Any]
    shape: Tuple[int, ...]
    variable: bool
    #: the tick of each logged row group, shape ``(n,)``
    tick: NDArray[np.int64]
    #: fixed: ``(n, *shape)``; variable: every row, ``(sum(rows), *shape[1:])``
    data: NDArray[Any]
    #: rows per tick (variable signals; for fixed ones, the signal's rows per tick)
    rows: NDArray[np.int64]

    def per_tick(self) -> Iterator[Tuple[int, NDArray[Any]]]:
        """``(tick, rows of that tick)`` in order (for variable signals, views of ``data``)."""
        if not self.variable:
            for t, d in zip(self.tick, self.data):
                yield int(t), d
            return
        at = 0
        for t, n in zip(self.tick, self.rows):
            yield int(t), self.data[at : at + int(n)]
            at += int(n)


@dataclass
class Log:
    """A runtime log: the ticks table and every logged signal."""

    path: Path
    #: columns tick, deadline_ns, start_ns, monotonic_ns, realtime_ns
    ticks: Dict[str, NDArray[np.int64]]
    signals: Dict[str, LoggedSignal]

    def __getitem__(self, name: str) -> LoggedSignal:
        try:
            return self.signals[name]
        except KeyError:
            raise KeyError(
                f"{self.path} logs no signal {name!r}; it logs: {', '.join(self.signals) or 'none'}"
            ) from None

    def __repr__(self) -> str:
        return f"<rtloop.Log {self.path.name}: {len(self.ticks['tick'])} ticks, signals {list(self.signals)}>"


def load_log(path: Union[str, "Path"]) -> Log:
    """Read a runtime log written by the ``logger`` sink.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        The file is not a runtime log (its tables are missing or damaged).
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no runtime log at {p}")
    db = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    try:
        try:
            tick_rows = db.execute(
                "SELECT tick, deadline_ns, start_ns, monotonic_ns, realtime_ns FROM ticks ORDER BY tick"
            ).fetchall()
            meta = db.execute(
                "SELECT name, dtype, shape, rows_per_tick, variable, table_name FROM signals"
            ).fetchall()
        except sqlite3.DatabaseError as e:
            raise ValueError(f"{p} is not a runtime log (the logger sink writes one): {e}") from None
        cols = ("tick", "deadline_ns", "start_ns", "monotonic_ns", "realtime_ns")
        arr = np.array(tick_rows, dtype=np.int64).reshape(-1, len(cols))
        ticks = {c: arr[:, k].copy() for k, c in enumerate(cols)}
        signals: Dict[str, LoggedSignal] = {}
        for name, dtype, shape_text, rows_per_tick, variable, table in meta:
            dt = np.dtype(dtype)
            shape = tuple(int(x) for x in json.loads(shape_text))
            quoted = '"' + table.replace('"', '""') + '"'
            columns = [r[1] for r in db.execute(f"PRAGMA table_info({quoted})")]
            if "data" in columns:
                rows_ = db.execute(f"SELECT tick, rows, data FROM {quoted} ORDER BY rowid").fetchall()
                tick = np.array([r[0] for r in rows_], dtype=np.int64)
                rows = np.array([r[1] for r in rows_], dtype=np.int64)
                raw = b"".join(r[2] for r in rows_)
                flat = np.frombuffer(raw, dtype=dt)
                # a variable signal's rows differ per tick: all rows, one after another
                data = flat.reshape(-1, *shape[1:]) if variable else flat.reshape(len(tick), *shape)
            else:
                values = db.execute(f"SELECT * FROM {quoted} ORDER BY rowid").fetchall()
                tick = np.array([r[0] for r in values], dtype=np.int64)
                data = np.array([r[1:] for r in values], dtype=dt).reshape(len(tick), *shape)
                rows = np.full(len(tick), int(rows_per_tick), dtype=np.int64)
            signals[name] = LoggedSignal(name, dt, shape, bool(variable), tick, data, rows)
        return Log(p, ticks, signals)
    finally:
        db.close()

