"""The runtime's SQLite log (the `logger` sink, LiCoRICE's logger) read into numpy.

    >>> log = rtloop.load_log("spikes.db")
    >>> log.ticks["start_ns"]                   # one row per tick
    >>> log["spikes"].data.shape                # (ticks, 32): one row of the signal per tick
    >>> log["events"].rows                      # a variable signal: rows per tick, then data
    >>> log["raw"].channels                     # the model's channel names, if it gave them
    >>> log["raw"].to_pandas()                  # a DataFrame: a row per sample, a column per channel

Fixed signals come back as one array shaped ``(ticks, *shape)`` of the signal's dtype;
variable signals as their concatenated rows plus the number of rows each tick carried.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple, Union

import numpy as np
from numpy.typing import NDArray

from . import _rtloop

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
    #: one name per value of a row (the model's ``channels:``); empty if it gave none
    channels: Tuple[str, ...] = ()
    #: one unit per value of a row (the model's ``units:``); empty if it gave none
    units: Tuple[str, ...] = ()

    def column_names(self) -> Tuple[str, ...]:
        """A name per value of a row: the channel names, else ``v0``, ``v1``, ..."""
        per_row = int(np.prod(self.shape[1:] if len(self.shape) >= 2 else self.shape))
        if len(self.channels) == per_row:
            return self.channels
        return tuple(f"v{i}" for i in range(per_row))

    def to_pandas(self) -> Any:
        """The signal as a ``pandas.DataFrame``: one row per sample (a signal of shape
        ``[samples, channels]`` gives ``samples`` rows per tick), one column per channel,
        named by the model's ``channels:``, and a ``tick`` column. Needs pandas."""
        pd: Any = importlib.import_module("pandas")  # optional: only this method needs it

        names = self.column_names()
        per_tick = self.rows if self.variable else np.full(len(self.tick), self.shape[0] if len(self.shape) >= 2 else 1)
        flat = self.data.reshape(-1, len(names)) if len(names) else self.data.reshape(-1, 0)
        frame = pd.DataFrame(flat, columns=list(names))
        frame.insert(0, "tick", np.repeat(self.tick, per_tick))
        return frame

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
    # the log's tables are rtloop-runtime's: its reader returns typed values and arrays
    ticks, read = _rtloop.read_log(p)
    signals: Dict[str, LoggedSignal] = {}
    for name, dtype, shape, variable, tick, data, rows, channels, units in read:
        signals[name] = LoggedSignal(name, np.dtype(dtype), shape, variable, tick, data, rows, channels, units)
    return Log(p, ticks, signals)
