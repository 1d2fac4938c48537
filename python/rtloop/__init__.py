"""rtloop: realtime data streaming for neuroscience.

A **stream** is a named, typed, multichannel sample ring in shared memory with one writer
and any number of readers in any process. Data are numpy arrays of shape
``(n_samples, n_channels)`` everywhere.

>>> import numpy as np, rtloop
>>> stream = rtloop.Stream.create("demo", n_channels=4, dtype="float32", sfreq=1000.0)
>>> reader = stream.reader()
>>> with stream.writer() as w:
...     written = w.push_chunk(np.zeros((10, 4), dtype=np.float32))
>>> data, timestamps = reader.pull_chunk()
>>> data.shape
(10, 4)
>>> rtloop.Stream.remove("demo")

The package is kept import-light (the native module loads on first use), so the ``rtloop``
command starts instantly.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it (imported on first access)
_LAZY = {
    "Stream": "rtloop.stream",
    "Writer": "rtloop.stream",
    "Reader": "rtloop.stream",
    "Event": "rtloop.stream",
    "StreamInfo": "rtloop.stream",
    "resolve_streams": "rtloop.stream",
    "local_clock": "rtloop.stream",
    "DTYPES": "rtloop.stream",
    "set_log_level": "rtloop._logging",
    "load_log": "rtloop.log",
    "Log": "rtloop.log",
    "load": "rtloop.recording",
    "Recording": "rtloop.recording",
    "record": "rtloop.recording",
    "Recorder": "rtloop.recording",
    "RtloopError": "rtloop._rtloop",
    "StreamNotFoundError": "rtloop._rtloop",
    "StreamExistsError": "rtloop._rtloop",
    "NotAStreamError": "rtloop._rtloop",
    "LayoutVersionError": "rtloop._rtloop",
    "WriterBusyError": "rtloop._rtloop",
    "NoReaderSlotError": "rtloop._rtloop",
    "OverrunError": "rtloop._rtloop",
    "WindowError": "rtloop._rtloop",
    "TooOldError": "rtloop._rtloop",
    "NotYetWrittenError": "rtloop._rtloop",
    "WriteTimeoutError": "rtloop._rtloop",
    "WriterDeadError": "rtloop._rtloop",
    "EventError": "rtloop._rtloop",
    "WriterClosedError": "rtloop._rtloop",
    "ForkedHandleError": "rtloop._rtloop",
    "IncompleteWriteError": "rtloop._rtloop",
}

__all__ = ["__version__", *_LAZY]

if TYPE_CHECKING:
    from ._logging import set_log_level
    from ._rtloop import (
        EventError,
        ForkedHandleError,
        IncompleteWriteError,
        LayoutVersionError,
        NoReaderSlotError,
        NotAStreamError,
        NotYetWrittenError,
        OverrunError,
        RtloopError,
        StreamExistsError,
        StreamNotFoundError,
        TooOldError,
        WindowError,
        WriterBusyError,
        WriterClosedError,
        WriterDeadError,
        WriteTimeoutError,
    )
    from .log import Log, load_log
    from .recording import Recorder, Recording, load, record
    from .stream import (
        DTYPES,
        Event,
        Reader,
        Stream,
        StreamInfo,
        Writer,
        local_clock,
        resolve_streams,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rtloop' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
