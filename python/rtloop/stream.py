"""Streams, writers and readers.

A stream is a named shared-memory sample ring (``/dev/shm/rtloop-<name>``, owner-only) with
exactly one writer and any number of readers in any process. Samples carry absolute
indices: sample ``i`` is the ``i``-th sample ever written. Data are numpy arrays of shape
``(n_samples, n_channels)`` everywhere; timestamps are float64 seconds of
``CLOCK_MONOTONIC`` (see :func:`local_clock`).

Two reader modes:

``"latest"``
    The writer never waits. A reader that falls more than ``capacity`` samples behind gets
    :class:`~rtloop.OverrunError` telling exactly how many samples it lost, never torn or
    stale data.
``"lossless"``
    The writer waits (up to :attr:`Writer.timeout`) until the reader has consumed a sample
    before overwriting it.

Zero-copy views (:meth:`Reader.window`, :meth:`Reader.latest`) show the stream's memory
itself: they are only valid until the writer laps them. Check them with
:meth:`Reader.check` after use, or copy with :meth:`Reader.read`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
from numpy.typing import DTypeLike, NDArray

from . import _rtloop
from ._rtloop import OverrunError, WriterClosedError
from ._checks import check_type, check_value, ensure_int, ensure_timeout
from ._logging import init_logging

init_logging()

#: The sample dtypes a stream can hold (the FieldTrip set).
# numpy's lazily looked-up parts, looked up now rather than by a thread at exit
_rtloop._prepare_numpy()

DTYPES: Tuple[str, ...] = tuple(_rtloop.DTYPES)

__all__ = [
    "DTYPES",
    "Event",
    "Reader",
    "Stream",
    "StreamInfo",
    "Writer",
    "local_clock",
    "resolve_streams",
]


def local_clock() -> float:
    """Seconds of ``CLOCK_MONOTONIC``, the clock of every rtloop timestamp.

    Like pylsl's ``local_clock``: use it to compare timestamps from :meth:`Reader.pull_chunk`
    with the present.

    Returns
    -------
    seconds : float
    """
    return _rtloop.local_clock()


def _dtype_name(dtype: DTypeLike) -> str:
    try:
        name = str(np.dtype(dtype).name)
    except TypeError:
        name = str(dtype)
    check_value(name, DTYPES, "dtype")
    return name


class Event(NamedTuple):
    """One event (FieldTrip style) beside the samples.

    ``type`` and ``value`` are ``str``, ``int``, ``float`` or a 1-D numpy array; a numeric
    array of one element comes back as a Python scalar.
    """

    type: Any
    value: Any
    sample: int
    offset: int
    duration: int
    timestamp: float


def _event_value_to_native(v: Any, name: str) -> Any:
    if isinstance(v, (str, int, float)) and not isinstance(v, bool):
        return v
    if isinstance(v, (np.ndarray, np.generic)):
        arr = np.ascontiguousarray(v).reshape(-1)
        if arr.dtype.name not in DTYPES:
            raise TypeError(
                f"The '{name}' parameter must be a str, an int, a float or a numpy array of "
                f"one of {', '.join(DTYPES)}, but got an array of dtype {arr.dtype.name} "
                "instead."
            )
        return (arr.dtype.name, arr.tobytes())
    raise TypeError(
        f"The '{name}' parameter must be an instance of 'str', 'int', 'float' or a numeric "
        f"numpy array, but got {type(v).__name__!r} instead."
    )


def _event_value_from_native(v: Any) -> Any:
    if isinstance(v, tuple):
        dtype, raw = v
        arr = np.frombuffer(raw, dtype=dtype)
        return arr[0].item() if arr.size == 1 else arr.copy()
    return v


def _event(t: Tuple[Any, Any, int, int, int, float]) -> Event:
    return Event(
        _event_value_from_native(t[0]), _event_value_from_native(t[1]), t[2], t[3], t[4], t[5]
    )


def _window_base(view: Any) -> _rtloop.WindowBase:
    base = view
    while isinstance(base, np.ndarray):
        base = base.base
    if not isinstance(base, _rtloop.WindowBase):
        raise TypeError(
            "The 'view' parameter must be a zero-copy view made by Reader.window or "
            f"Reader.latest (or a slice of one), but got {type(view).__name__!r} that is not."
        )
    return base


class Stream:
    """A named stream in shared memory.

    Use :meth:`create` or :meth:`open` to get one, then :meth:`writer` (one per stream)
    and :meth:`reader` (any number).
    """

    __slots__ = ("_s",)

    def __init__(self, native: _rtloop.Stream) -> None:
        check_type(native, _rtloop.Stream, "native")
        self._s = native

    @classmethod
    def create(
        cls,
        name: str,
        *,
        n_channels: int,
        dtype: DTypeLike = "float32",
        sfreq: float = 0.0,
        capacity: int = 65536,
        ch_names: Optional[Sequence[str]] = None,
        ch_units: Optional[Sequence[str]] = None,
        event_capacity: int = 1024,
        replace: bool = False,
        content_type: str = "",
        source_id: str = "",
        ch_types: Union[str, Sequence[str], None] = None,
        desc: Optional[Dict[str, Any]] = None,
        keep: bool = False,
    ) -> "Stream":
        """Create a new stream.

        A stream ends when its writer closes: its name goes with it (readers already
        attached read on, and the memory comes back when the last of them is done), so a
        later run never finds this run's data. ``keep=True`` keeps the name after a clean
        close, to hand the stream to another writer or read it later. A stream whose writer
        dies is reclaimed by the next ``create``, :func:`resolve_streams` or
        ``rtloop stream gc``.

        Parameters
        ----------
        name : str
            1 to 64 characters from ``A-Z a-z 0-9 _ - .`` (not starting with ``.``).
        n_channels : int
            Channels per sample (>= 1).
        dtype : str | numpy.dtype
            One of :data:`DTYPES` (``int8`` … ``uint64``, ``float32``, ``float64``).
        sfreq : float
            Nominal sample rate in Hz; 0 means irregular.
        capacity : int
            Samples kept (>= 1; rounded up to whole memory pages).
        ch_names, ch_units : sequence of str | None
            One per channel (names default to ``ch0``, ``ch1``, …).
        event_capacity : int
            Events kept (>= 1).
        replace : bool
            Replace a stream of that name that nobody writes any more (its writer closed or
            died, as a crashed run leaves it). A stream whose writer is alive is never
            replaced. Readers that have the old stream open keep reading the old one.
        content_type : str
            What the stream carries, as LSL's stream type: ``"EEG"``, ``"Markers"``, ...
            (at most 31 bytes). :func:`resolve_streams` finds streams by it.
        source_id : str
            Who produces it: a serial number or rig name that stays the same across
            restarts (at most 63 bytes), as LSL's ``source_id``.
        ch_types : str | sequence of str | None
            Channel types as MNE and LSL name them (``"eeg"``, ``"stim"``, ``"misc"``, ...):
            one per channel, or one string for every channel (at most 31 bytes each).
        desc : dict | None
            Free-form description (LSL's ``desc``): any JSON-serialisable dict, e.g. the
            amplifier, the montage, the subject. Types and description together take at
            most 3776 bytes (they live in the stream's header).
        keep : bool
            Keep the name when the writer closes cleanly (see above); remove it by hand
            with :meth:`remove` or ``rtloop stream remove``.

        Returns
        -------
        stream : Stream

        Raises
        ------
        StreamExistsError
            A stream of that name exists (without ``replace``), or its writer is alive
            (``.pid`` names it), or the file under that name is not an rtloop stream.
        ValueError
            A bad name, channel count, capacity, rate or label, or a stream larger than the
            memory allows.
        """
        check_type(name, str, "name")
        n_channels = ensure_int(n_channels, "n_channels")
        capacity = ensure_int(capacity, "capacity")
        event_capacity = ensure_int(event_capacity, "event_capacity")
        check_type(sfreq, (int, float), "sfreq")
        check_type(replace, bool, "replace")
        check_type(keep, bool, "keep")
        names = [] if ch_names is None else list(ch_names)
        units = [] if ch_units is None else list(ch_units)
        if ch_types is None:
            types: List[str] = []
        elif isinstance(ch_types, str):
            types = [ch_types] * n_channels
        else:
            types = list(ch_types)
        for label, what in ((names, "ch_names"), (units, "ch_units"), (types, "ch_types")):
            for s in label:
                check_type(s, str, what)
        check_type(content_type, str, "content_type")
        check_type(source_id, str, "source_id")
        if desc is None:
            description = ""
        else:
            check_type(desc, dict, "desc")
            try:
                description = json.dumps(desc, separators=(",", ":"), allow_nan=False)
            except (TypeError, ValueError) as e:
                raise TypeError(
                    f"The 'desc' parameter must be a JSON-serialisable dict (str keys; "
                    f"str, int, float, bool, None, list and dict values): {e}"
                ) from None
        native = _rtloop.Stream.create(
            name,
            _dtype_name(dtype),
            n_channels,
            float(sfreq),
            capacity,
            event_capacity,
            names,
            units,
            replace,
            ch_types=types,
            content_type=content_type,
            source_id=source_id,
            description=description,
            keep=keep,
        )
        return cls(native)

    @classmethod
    def open(cls, name: str) -> "Stream":
        """Open an existing stream by name.

        Raises
        ------
        StreamNotFoundError
            No such stream.
        NotAStreamError, LayoutVersionError
            The file is not a stream of this rtloop's layout.
        """
        check_type(name, str, "name")
        return cls(_rtloop.Stream.open(name))

    @staticmethod
    def list() -> List[str]:
        """Names of the streams there are (sorted)."""
        return _rtloop.Stream.list()

    @staticmethod
    def gc() -> List[Tuple[str, int, str]]:
        """Give back the memory of every ended stream nobody keeps (a dead writer's, one a
        crash left half made) and say what was freed: ``(name, bytes, why)`` for each."""
        return [tuple(r) for r in _rtloop.Stream.collect_ended()]  # type: ignore[misc]

    @property
    def state(self) -> str:
        """Where the stream is in its life: ``"live"`` (a writer holds it), ``"waiting"``
        (no writer yet), ``"closed"``, ``"dead"`` (its writer ended without closing) or
        ``"damaged"`` (see :attr:`damage`)."""
        return self._s.state

    @property
    def damage(self) -> Optional[str]:
        """Why the stream's shared counters cannot be right (something other than its writer
        wrote into its file), or ``None`` while they can."""
        return self._s.damage

    @property
    def keep(self) -> bool:
        """Whether the name outlives a clean close (``Stream.create(keep=True)``)."""
        return self._s.keep

    @staticmethod
    def remove(name: str) -> None:
        """Remove a stream's name. Processes that have it open keep using it; new opens fail.

        Raises
        ------
        StreamNotFoundError
            No such stream.
        """
        check_type(name, str, "name")
        _rtloop.Stream.remove(name)

    @property
    def name(self) -> str:
        """Stream name."""
        return self._s.name

    @property
    def dtype(self) -> np.dtype[Any]:
        """Sample dtype."""
        return np.dtype(self._s.dtype)

    @property
    def n_channels(self) -> int:
        """Channels per sample."""
        return self._s.n_channels

    @property
    def sfreq(self) -> float:
        """Nominal sample rate in Hz (0 = irregular)."""
        return self._s.sfreq

    @property
    def ch_names(self) -> List[str]:
        """Channel names."""
        return self._s.ch_names

    @property
    def ch_units(self) -> List[str]:
        """Channel units ('' where none was given)."""
        return self._s.ch_units

    @property
    def ch_types(self) -> List[str]:
        """Channel types (empty if none were given)."""
        return self._s.ch_types

    @property
    def content_type(self) -> str:
        """What the stream carries (LSL's stream type; '' if none was given)."""
        return self._s.content_type

    @property
    def source_id(self) -> str:
        """Who produces it ('' if none was given)."""
        return self._s.source_id

    @property
    def desc(self) -> Dict[str, Any]:
        """The free-form description given at creation (``{}`` if none). A description
        that is not a JSON object (written by another tool) comes back as ``{"text": ...}``."""
        return _parse_desc(self._s.description)

    @property
    def info(self) -> "StreamInfo":
        """The stream's metadata as :class:`StreamInfo` (what :func:`resolve_streams` lists)."""
        return StreamInfo._of(self._s)

    @property
    def capacity(self) -> int:
        """Samples kept."""
        return self._s.capacity

    @property
    def event_capacity(self) -> int:
        """Events kept."""
        return self._s.event_capacity

    @property
    def path(self) -> str:
        """Path of the shared-memory file."""
        return str(self._s.path)

    @property
    def written(self) -> int:
        """Samples committed so far (absolute count since the stream began)."""
        return self._s.written

    @property
    def occupancy(self) -> float:
        """``written - slowest reader`` over ``capacity``, in percent (ONIX PercentUsed)."""
        return float(self._s.stats()["percent_used"])

    def stats(self) -> dict[str, Any]:
        """A snapshot of the stream's counters.

        Returns
        -------
        stats : dict
            ``written``, ``capacity``, ``occupancy`` (samples), ``percent_used``,
            ``high_water``, ``overruns``, ``lost_samples``, ``events_written``, ``commits``,
            ``writer`` (a dict, see :meth:`writer_liveness`) and ``readers`` (one dict per
            reader: ``slot``, ``pid``, ``mode``, ``cursor``, ``lag``, ``lost``,
            ``overruns``, ``alive``).
        """
        return self._s.stats()

    def writer_liveness(self) -> dict[str, Any]:
        """The writer's state: ``{"state": "none"|"active"|"closed"|"dead", "pid": ...}``.

        An active writer also has ``since_heartbeat`` (seconds since its last commit or
        heartbeat).
        """
        return self._s.writer_liveness()

    def writer(self, *, timeout: Optional[float] = None) -> "Writer":
        """Become the stream's one writer.

        Parameters
        ----------
        timeout : float | None
            Seconds a write waits for lossless readers to make room (default 5).

        Raises
        ------
        WriterBusyError
            Another live process or object holds the writer (its ``pid`` is named).
        """
        w = Writer(self._s.writer(), self)
        if timeout is not None:
            w.timeout = timeout
        return w

    def reader(
        self, mode: str = "latest", *, start: Union[str, int] = "newest", on_overrun: str = "raise"
    ) -> "Reader":
        """Register a reader.

        Parameters
        ----------
        mode : ``"latest"`` | ``"lossless"``
            Latest-wins (the writer never waits) or lossless (the writer waits for this
            reader).
        start : ``"newest"`` | ``"oldest"`` | int
            Where the reader begins: after the newest sample (the default: only what is
            written from now on), at the oldest sample and event the stream still keeps
            (everything since the writer started, if nothing was overwritten yet), or at an
            absolute sample index up to :attr:`written` (a later one raises
            ``NotYetWrittenError``).
        on_overrun : ``"raise"`` | ``"skip"``
            What a pull does when the writer lapped this reader: raise
            :class:`~rtloop.OverrunError` (the default), or skip what was overwritten, count
            it in :attr:`Reader.lost` and return the oldest samples still kept (as pylsl
            drops silently; handy for a display loop).
        """
        check_type(mode, str, "mode")
        check_value(mode, ("latest", "lossless"), "mode")
        check_value(on_overrun, ("raise", "skip"), "on_overrun")
        if isinstance(start, str):
            check_value(start, ("newest", "oldest"), "start")
        else:
            start = ensure_int(start, "start")
        r = Reader(self._s.reader(mode), self, on_overrun)
        if start == "oldest":
            r._r.seek(r._r.oldest)
            r._r.seek_events(r._r.oldest_event)
        elif not isinstance(start, str):
            r._r.seek(start)
        return r

    def __repr__(self) -> str:
        return (
            f"<Stream {self.name!r} | {self.dtype.name} x {self.n_channels} ch @ "
            f"{self.sfreq:g} Hz, capacity {self.capacity}, written {self.written}>"
        )


def _parse_desc(text: str) -> Dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"text": text}
    return value if isinstance(value, dict) else {"text": text}


@dataclass(frozen=True)
class StreamInfo:
    """What a stream is, as LSL's ``StreamInfo``: found by :func:`resolve_streams`, or
    :attr:`Stream.info` of an open stream. :meth:`open` opens the stream it describes."""

    name: str
    content_type: str
    n_channels: int
    sfreq: float
    dtype: str
    source_id: str
    ch_names: List[str] = field(default_factory=list)
    ch_units: List[str] = field(default_factory=list)
    ch_types: List[str] = field(default_factory=list)
    desc: Dict[str, Any] = field(default_factory=dict)
    capacity: int = 0
    created_at: float = 0.0
    """Creation time, Unix seconds."""
    creator_pid: int = 0
    writer: str = "none"
    """The writer's state when listed: ``"none"``, ``"active"``, ``"closed"`` or ``"dead"``."""
    path: str = ""
    state: str = "live"
    """Where the stream was in its life when resolved: ``"live"`` (a writer holds it),
    ``"waiting"`` (made, no writer yet), ``"closed"``, ``"dead"`` (its writer ended without
    closing) or ``"damaged"`` (the file is not a stream this rtloop reads, or its counters
    cannot be right; see ``damage``).
    Only ``resolve_streams(ended=True)`` returns anything but live streams."""
    damage: str = ""
    """Why a damaged stream cannot be read or trusted (empty otherwise)."""
    internal: bool = False
    """Used inside one rtloop tool (the lab's transport, ...): resolved only with
    ``internal=True``."""

    @classmethod
    def _of(cls, s: _rtloop.Stream) -> "StreamInfo":
        return cls(
            name=s.name,
            content_type=s.content_type,
            n_channels=s.n_channels,
            sfreq=s.sfreq,
            dtype=s.dtype,
            source_id=s.source_id,
            ch_names=list(s.ch_names),
            ch_units=list(s.ch_units),
            ch_types=list(s.ch_types),
            desc=_parse_desc(s.description),
            capacity=s.capacity,
            created_at=s.created_unix_ns / 1e9,
            creator_pid=s.creator_pid,
            writer=str(s.writer_liveness()["state"]),
            path=str(s.path),
            state=s.state,
            damage=s.damage or "",
            internal=s.internal,
        )

    @classmethod
    def _damaged(cls, name: str, reason: str) -> "StreamInfo":
        return cls(
            name=name, content_type="", n_channels=0, sfreq=0.0, dtype="", source_id="",
            writer="none", state="damaged", damage=reason,
        )

    def open(self) -> "Stream":
        """Open the stream this describes."""
        return Stream.open(self.name)


def resolve_streams(
    *,
    name: Optional[str] = None,
    type: Optional[str] = None,
    source_id: Optional[str] = None,
    minimum: int = 0,
    timeout: Optional[float] = 0.0,
    ended: bool = False,
    internal: bool = False,
) -> List[StreamInfo]:
    """The live streams on this machine with their metadata, as pylsl's ``resolve_streams``
    and ``resolve_byprop`` (which find live outlets only).

    Parameters
    ----------
    name, type, source_id : str | None
        Keep only streams whose name, content type or source id equals this (``None``: any).
    minimum : int
        Wait until at least this many streams match (0: list what there is now).
    timeout : float | None
        Seconds to wait for ``minimum`` matches; ``None`` waits for ever. When it runs out,
        what matched so far is returned (as pylsl does), possibly fewer than ``minimum``.
    ended : bool
        Also return streams that are not live: made but not written yet (``"waiting"``),
        ``"closed"`` (kept after their writer closed), ``"dead"`` and ``"damaged"``; each
        one's :attr:`StreamInfo.state` says which. Without it only streams a live writer
        holds are returned, so a reader never picks up an earlier run's data.
    internal : bool
        Also return streams used inside one rtloop tool (the lab's transport, ...).

    Returns
    -------
    infos : list of StreamInfo
        Sorted by name. Streams whose writer died are reclaimed on the way (their memory
        given back) unless they were made with ``keep=True``.
    """
    for value, what in ((name, "name"), (type, "type"), (source_id, "source_id")):
        if value is not None:
            check_type(value, str, what)
    check_type(ended, bool, "ended")
    check_type(internal, bool, "internal")
    minimum = ensure_int(minimum, "minimum")
    wait = ensure_timeout(timeout)
    deadline = None if wait is None else time.monotonic() + wait
    while True:
        found = []
        listed, _freed = _rtloop.Stream.survey(True)
        for stream_name, state, detail, s in listed:
            if name is not None and stream_name != name:
                continue
            if state != "live" and not ended:
                continue
            if s is None:
                if type is None and source_id is None:
                    found.append(StreamInfo._damaged(stream_name, detail.removeprefix("damaged: ")))
                continue
            if s.internal and not internal:
                continue
            if type is not None and s.content_type != type:
                continue
            if source_id is not None and s.source_id != source_id:
                continue
            found.append(StreamInfo._of(s))
        if len(found) >= minimum or (deadline is not None and time.monotonic() >= deadline):
            return found
        time.sleep(0.05)


class Writer:
    """The one writer of a stream (from :meth:`Stream.writer`). Use as a context manager
    or call :meth:`close` to let another process write."""

    __slots__ = ("_w", "_stream")

    def __init__(self, native: _rtloop.Writer, stream: Stream) -> None:
        self._w = native
        self._stream = stream

    @property
    def stream(self) -> Stream:
        """The stream written to."""
        return self._stream

    @property
    def written(self) -> int:
        """Samples committed so far."""
        return self._w.written

    @property
    def timeout(self) -> float:
        """Seconds a write waits for lossless readers to make room before
        :class:`~rtloop.WriteTimeoutError`."""
        return self._w.timeout

    @timeout.setter
    def timeout(self, value: float) -> None:
        t = ensure_timeout(value)
        if t is None:
            raise TypeError("The 'timeout' parameter must be a number of seconds, not None.")
        self._w.timeout = t

    def _from_list(self, data: Union[List[Any], Tuple[Any, ...]], what: str, chunk: bool) -> NDArray[Any]:
        """A list or tuple as pylsl takes it: a sample, a list of samples, or (for a chunk)
        a flat list of n_samples x n_channels values. Values are converted to the stream's
        dtype only when that keeps them: an integer stream takes integers in its range."""
        s = self._stream
        try:
            arr = np.asarray(data)
        except ValueError as e:
            raise ValueError(
                f"The '{what}' list is ragged ({e}); give {s.n_channels} values per sample."
            ) from None
        if arr.dtype.kind not in "biuf" or arr.dtype.kind == "b":
            raise TypeError(
                f"The '{what}' list must hold numbers for stream {s.name!r} ({s.dtype.name}), "
                f"but it holds {arr.dtype.name if arr.dtype.kind != 'O' else 'other objects'}."
            )
        if s.dtype.kind in "iu":
            info = np.iinfo(s.dtype)
            if arr.size and arr.dtype.kind == "f" and not np.all(np.isfinite(arr) & (arr == np.round(arr))):
                raise ValueError(
                    f"Stream {s.name!r} holds {s.dtype.name}: the '{what}' list has values that "
                    f"are not whole numbers; round them first (rtloop does not truncate)."
                )
            if arr.size and (arr.min() < info.min or arr.max() > info.max):
                raise ValueError(
                    f"Stream {s.name!r} holds {s.dtype.name}, which stores {info.min} to "
                    f"{info.max}; the '{what}' list has values from {arr.min()} to {arr.max()}."
                )
        arr = arr.astype(s.dtype)
        if chunk and arr.ndim == 1 and (s.n_channels == 1 or arr.shape[0] != s.n_channels):
            # pylsl's flat chunk: n_samples x n_channels values, sample by sample
            if arr.shape[0] % s.n_channels:
                raise ValueError(
                    f"Stream {s.name!r} has {s.n_channels} channels: a flat list holds whole "
                    f"samples ({s.n_channels} values each), but got {arr.shape[0]} values."
                )
            arr = arr.reshape(-1, s.n_channels)
        return arr

    def _check(self, data: Any, what: str, chunk: bool = False) -> NDArray[Any]:
        s = self._stream
        if isinstance(data, (list, tuple)):
            return self._from_list(data, what, chunk)
        if not isinstance(data, np.ndarray):
            raise TypeError(
                f"The '{what}' parameter must be a numpy array of dtype {s.dtype.name} "
                f"and shape (n_samples, {s.n_channels}) (or a list of numbers, as pylsl "
                f"takes), but got {type(data).__name__!r} instead."
            )
        if data.dtype != s.dtype:
            got = data.dtype.name
            if data.dtype.newbyteorder("=") == s.dtype and data.dtype.byteorder not in "=|":
                # same type, other byte order ('>f4'): say so, the names alone are equal
                got = f"{data.dtype.str} ({'big' if data.dtype.byteorder == '>' else 'little'}-endian {got})"
            raise TypeError(
                f"Stream {s.name!r} holds {s.dtype.name} samples in native byte order, but the "
                f"'{what}' array has dtype {got}; convert it first "
                f"(data.astype(np.{s.dtype.name})), rtloop does not cast silently."
            )
        return data

    def push_chunk(self, data: NDArray[Any], timestamp: Optional[float] = None) -> int:
        """Write samples.

        Parameters
        ----------
        data : numpy.ndarray, shape ``(n_samples, n_channels)`` or ``(n_channels,)``, or a list
            An array of the stream's dtype exactly (no silent casting); a 1-D array is one
            sample. Lists and tuples are taken as pylsl takes them: a list of samples, one
            sample, or a flat list of ``n_samples * n_channels`` values; their values are
            converted to the stream's dtype only if they fit (an integer stream refuses
            fractions and values outside its range).
        timestamp : float | None
            ``CLOCK_MONOTONIC`` seconds (see :func:`local_clock`) of the chunk's last
            sample; default: now. The stream keeps one stamp per chunk; readers give each
            sample its own time, as pylsl does: in a stream with a rate (``sfreq > 0``)
            each earlier sample is one period earlier, in an irregular stream every sample
            of the chunk has ``timestamp``.

        Returns
        -------
        written : int
            Samples committed so far, including these.

        Raises
        ------
        TypeError
            Not a numpy array, or of another dtype.
        ValueError
            Not of shape ``(n_samples, n_channels)``.
        WriteTimeoutError
            A lossless reader did not make room within :attr:`timeout` (nothing of this
            chunk was written).
        IncompleteWriteError
            A chunk longer than the stream's capacity goes in pieces; a later piece failed
            (its reason is ``__cause__``): ``.committed`` of the ``.requested`` samples are
            in the stream.
        ForkedHandleError
            The writer was made by the parent of this process (``os.fork()``).
        """
        arr = self._check(data, "data", chunk=True)
        n_ch = self._stream.n_channels
        if arr.ndim == 1:
            if arr.shape[0] != n_ch:
                raise ValueError(
                    f"Stream {self._stream.name!r} has {n_ch} channels: a 1-D array is one "
                    f"sample of shape ({n_ch},), but got shape {arr.shape}."
                )
        elif arr.ndim != 2 or arr.shape[1] != n_ch:
            raise ValueError(
                f"Stream {self._stream.name!r} has {n_ch} channels: expected shape "
                f"(n_samples, {n_ch}), but got shape {arr.shape}."
            )
        if timestamp is not None:
            check_type(timestamp, (int, float), "timestamp")
        return self._w.write(np.ascontiguousarray(arr), timestamp)

    def push_sample(self, sample: NDArray[Any], timestamp: Optional[float] = None) -> int:
        """Write one sample: an array of shape ``(n_channels,)`` of the stream's dtype, or a
        list of ``n_channels`` numbers.

        See :meth:`push_chunk`.
        """
        arr = self._check(sample, "sample")
        n_ch = self._stream.n_channels
        if arr.shape != (n_ch,):
            raise ValueError(
                f"Stream {self._stream.name!r} has {n_ch} channels: a sample has shape "
                f"({n_ch},), but got shape {arr.shape}."
            )
        return self.push_chunk(arr, timestamp)

    def reserve(self, n_samples: int) -> "_Reservation":
        """Reserve samples, fill a buffer for them, then commit.

        Use as a context manager: the buffer is published when the block ends without an
        exception (all of it, or the first ``k`` samples after ``res.commit(k)``) and
        dropped otherwise::

            with writer.reserve(100) as buf:   # buf: (100, n_channels), writable
                buf[:] = source                 # fill it (or np.sin(x, out=buf), ...)

        Parameters
        ----------
        n_samples : int
            At most ``capacity``.

        Returns
        -------
        reservation : context manager giving a writable numpy buffer of shape
            ``(n_samples, n_channels)``. The commit copies it into the stream (one copy;
            the samples' slots are reserved from now on, as for a Rust ``WriteGuard``).
            After commit or cancel the buffer is read-only, and no view of it can change
            the stream: published samples change only by new writes.
        """
        n = ensure_int(n_samples, "n_samples")
        return _Reservation(self, self._w.reserve(n))

    def push_event(
        self,
        type: Any,
        value: Any,
        sample: int,
        offset: int = 0,
        duration: int = 0,
    ) -> int:
        """Append an event (FieldTrip style) to the stream's event ring.

        Parameters
        ----------
        type, value : str | int | float | numpy.ndarray
            Text, an int (stored as int64), a float (float64) or a numeric array.
        sample : int
            The sample the event refers to (absolute index).
        offset : int
            Offset in samples from ``sample``.
        duration : int
            Duration in samples (>= 0).

        Returns
        -------
        index : int
            The event's index.
        """
        sample = ensure_int(sample, "sample")
        duration = ensure_int(duration, "duration")
        offset = ensure_int(offset, "offset", minimum=-(2**63))
        return self._w.push_event(
            _event_value_to_native(type, "type"),
            _event_value_to_native(value, "value"),
            sample,
            offset,
            duration,
        )

    def heartbeat(self) -> None:
        """Tell readers this writer is alive although it has nothing to write."""
        self._w.heartbeat()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._w.closed

    def close(self) -> None:
        """Give the stream up; readers see a cleanly closed writer."""
        self._w.close()

    def __enter__(self) -> "Writer":
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"written {self.written}"
        return f"<Writer of {self._stream.name!r}, {state}>"


class _Reservation:
    """A reservation made by :meth:`Writer.reserve` (a context manager)."""

    __slots__ = ("_writer", "view", "_done")

    def __init__(self, writer: Writer, view: NDArray[Any]) -> None:
        self._writer = writer
        #: The writable ``(n_samples, n_channels)`` buffer of the reserved samples.
        self.view = view
        self._done = False

    def commit(self, n_samples: Optional[int] = None) -> int:
        """Publish the first ``n_samples`` (default all); returns the new ``written``."""
        n = None if n_samples is None else ensure_int(n_samples, "n_samples")
        written = self._writer._w.commit(n)
        self._finish()
        return written

    def cancel(self) -> None:
        """Drop the reservation without publishing anything."""
        self._writer._w.cancel()
        self._finish()

    def _finish(self) -> None:
        self._done = True
        self.view.flags.writeable = False

    def __enter__(self) -> NDArray[Any]:
        return self.view

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self._done:
            return
        if exc_type is None:
            self.commit()
        else:
            self.cancel()


class Reader:
    """A registered reader of a stream (from :meth:`Stream.reader`).

    It starts at the newest sample; :attr:`cursor` is the next sample :meth:`pull_chunk`
    delivers, :meth:`seek` moves it. Use as a context manager or call :meth:`close`.
    """

    __slots__ = ("_r", "_stream", "_skip", "_lost")

    def __init__(self, native: _rtloop.Reader, stream: Stream, on_overrun: str = "raise") -> None:
        self._r = native
        self._stream = stream
        self._skip = on_overrun == "skip"
        self._lost = 0

    @property
    def lost(self) -> int:
        """Samples skipped because the writer lapped this reader (``on_overrun="skip"``)."""
        return self._lost

    @property
    def stream(self) -> Stream:
        """The stream read from."""
        return self._stream

    @property
    def mode(self) -> str:
        """``"latest"`` or ``"lossless"``."""
        return self._r.mode

    @property
    def cursor(self) -> int:
        """Index of the next sample :meth:`pull_chunk` delivers."""
        return self._r.cursor

    @property
    def available(self) -> int:
        """Samples waiting to be pulled."""
        return self._r.available

    @property
    def written(self) -> int:
        """Samples committed so far."""
        return self._r.written

    def pull_chunk(
        self, *args: Any, max_samples: int = 1024, timeout: Optional[float] = 0.0
    ) -> Tuple[NDArray[Any], NDArray[np.float64]]:
        """Copy out the next samples and advance the cursor.

        Both arguments are keyword-only: pylsl's ``pull_chunk(timeout, max_samples)`` takes
        them in the other order, so ``pull_chunk(0)`` would silently mean something else in
        one of the two; here it is an error that says so.

        Parameters
        ----------
        max_samples : int
            At most this many samples.
        timeout : float | None
            Seconds to wait for at least one sample: ``0.0`` never blocks, ``None`` waits
            forever. The wait releases the GIL and Ctrl-C interrupts it.

        Returns
        -------
        data : numpy.ndarray, shape ``(n_samples, n_channels)``
            A new array of the stream's dtype (``n_samples`` may be 0).
        timestamps : numpy.ndarray of float64, shape ``(n_samples,)``
            ``CLOCK_MONOTONIC`` seconds (see :func:`local_clock`), each sample's own: its
            chunk's stamp back-dated by one period per later sample of the chunk in a
            stream with a rate, the chunk's stamp in an irregular stream (see
            :meth:`Writer.push_chunk`).

        Raises
        ------
        OverrunError
            The reader was lapped; ``.lost`` samples are gone and the next pull continues
            from ``.oldest``.
        WriterDeadError
            Nothing is left to pull and the writer's process died.
        WriterClosedError
            Nothing is left to pull and the writer closed the stream cleanly (a blocking
            pull never waits forever for a writer that is gone).
        ForkedHandleError
            The reader was made by the parent of this process (``os.fork()``).
        """
        if args:
            raise TypeError(
                "pull_chunk takes keyword arguments only: pull_chunk(max_samples=..., "
                f"timeout=...), but got {len(args)} positional argument(s) {args!r}. pylsl's "
                "pull_chunk(timeout, max_samples) takes them in the other order, so a "
                "positional call would be misread by one of the two."
            )
        max_samples = ensure_int(max_samples, "max_samples")
        t = ensure_timeout(timeout)
        if not self._skip:
            return self._r.pull(max_samples, t)
        try:
            return self._r.pull(max_samples, t)
        except OverrunError as e:
            # skip what was overwritten (counted in .lost) and go on from the oldest kept
            self._lost += int(e.lost)
            return self._r.pull(max_samples, 0.0)

    def pull_sample(
        self, timeout: Optional[float] = 0.0
    ) -> Tuple[Optional[NDArray[Any]], Optional[float]]:
        """Copy out the next sample: ``(sample, timestamp)``, or ``(None, None)`` if none
        came within ``timeout`` (see :meth:`pull_chunk`). ``sample`` has shape
        ``(n_channels,)``."""
        data, ts = self.pull_chunk(max_samples=1, timeout=timeout)
        if len(data) == 0:
            return None, None
        return data[0], float(ts[0])

    def read(self, first: int, end: int) -> Tuple[NDArray[Any], NDArray[np.float64]]:
        """Copy samples ``[first, end)`` (validated); the cursor does not move.

        Returns
        -------
        data : numpy.ndarray, shape ``(end - first, n_channels)``
        timestamps : numpy.ndarray of float64, shape ``(end - first,)``

        Raises
        ------
        TooOldError
            ``first`` is before the oldest kept sample.
        NotYetWrittenError
            ``end`` is beyond :attr:`written`.
        OverrunError
            The writer overwrote the window while it was being copied.
        """
        first, end = ensure_int(first, "first"), ensure_int(end, "end")
        return self._r.read(first, end)

    def window(self, first: int, end: int) -> NDArray[Any]:
        """A zero-copy, read-only view of samples ``[first, end)``.

        The view shows the stream's memory itself and keeps it mapped for as long as the
        view (or any slice of it) lives, even after the stream and reader are gone. It is
        only **valid until the writer laps it** (in latest mode, once ``end - first`` plus
        the samples written since exceed ``capacity``): after using the data, call
        :meth:`check` (raises) or :meth:`valid` to know whether what you read was intact.

        Returns
        -------
        view : numpy.ndarray, shape ``(end - first, n_channels)``, read-only

        Raises
        ------
        TooOldError
            ``first`` is before the oldest kept sample.
        NotYetWrittenError
            ``end`` is beyond :attr:`written`.
        """
        first, end = ensure_int(first, "first"), ensure_int(end, "end")
        return self._r.window(first, end)

    def latest(self, n_samples: int) -> NDArray[Any]:
        """A zero-copy, read-only view of the newest ``n_samples`` (fewer if fewer were
        written, or if the writer stored into older slots for a reservation it cancelled or
        only partly committed), shape ``(n, n_channels)``. Valid until the writer laps it; see
        :meth:`window`. More than the capacity raises ``ValueError``."""
        return self._r.latest(ensure_int(n_samples, "n_samples"))

    def _window_bounds(self, winsize: Optional[float]) -> Tuple[int, int]:
        """``[first, end)`` of the newest ``winsize`` seconds that are kept."""
        sfreq = self._stream.sfreq
        end = self._r.written
        oldest = self._r.oldest
        if winsize is None:
            return oldest, end
        if isinstance(winsize, bool) or not isinstance(winsize, (int, float)) or not winsize > 0:
            raise ValueError(
                f"Invalid value for the 'winsize' parameter. Allowed values are seconds > 0 "
                f"or None (everything kept), but got {winsize!r} instead."
            )
        if sfreq > 0:
            n = int(np.ceil(float(winsize) * sfreq - 1e-9))
            return max(end - n, oldest), end
        # an irregular stream: the samples stamped within the last `winsize` seconds
        if end == oldest:
            return end, end
        stamps = self._r.stamps(oldest, end)
        first = oldest + int(np.searchsorted(stamps, stamps[-1] - float(winsize), side="right"))
        return first, end

    def _picks(self, picks: Any) -> Optional[List[int]]:
        if picks is None:
            return None
        names, types = self._stream.ch_names, self._stream.ch_types
        items = [picks] if isinstance(picks, (str, int)) else list(picks)
        out: List[int] = []
        for p in items:
            if isinstance(p, bool) or not isinstance(p, (str, int, np.integer)):
                raise TypeError(
                    f"The 'picks' parameter takes channel names, channel types or indices, "
                    f"but got {type(p).__name__!r}."
                )
            if isinstance(p, str):
                if p in names:
                    out.append(names.index(p))
                elif p in types:
                    out.extend(k for k, t in enumerate(types) if t == p)
                else:
                    raise ValueError(
                        f"Invalid value for the 'picks' parameter: {p!r} is neither a channel "
                        f"name nor a channel type of stream {self._stream.name!r} (names: "
                        f"{', '.join(names[:8])}{', ...' if len(names) > 8 else ''}; types: "
                        f"{', '.join(sorted(set(types))) or 'none given'})."
                    )
            else:
                k = int(p)
                if not -len(names) <= k < len(names):
                    raise ValueError(
                        f"Invalid value for the 'picks' parameter: channel index {k} is out of "
                        f"range for {len(names)} channels."
                    )
                out.append(k % len(names))
        return out

    def get_data(
        self,
        winsize: Optional[float] = None,
        picks: Any = None,
        *,
        copy: bool = True,
    ) -> Tuple[NDArray[Any], NDArray[np.float64]]:
        """The newest ``winsize`` seconds, as mne-lsl's ``StreamLSL.get_data``.

        Unlike the rest of rtloop, and like every MNE ``get_data``, data are shaped
        ``(n_channels, n_times)``. The cursor does not move, so a display can call this
        every frame beside other reads.

        Parameters
        ----------
        winsize : float | None
            Seconds (``ceil(winsize * sfreq)`` samples; for an irregular stream, the samples
            stamped within ``winsize`` seconds of the newest). ``None``: everything kept.
            Fewer samples come back while fewer were written.
        picks : str | int | sequence | None
            Channel names, channel types (``"eeg"``) or indices; ``None``: all channels.
        copy : bool
            ``True``: a validated copy. ``False``: a zero-copy, read-only view of the
            stream's ring (channels-first by a transpose, no copy) for plotting at high
            rates; as with :meth:`latest`, it is valid until the writer laps it
            (:meth:`valid`, :meth:`check`). Picks on a view copy the picked rows.

        Returns
        -------
        data : numpy.ndarray, shape ``(n_channels, n_times)``
        timestamps : numpy.ndarray of float64, shape ``(n_times,)``
            Each sample's time in seconds of :func:`local_clock`, as :meth:`pull_chunk`
            gives it.
        """
        data, ts, _ = self._get(winsize, self._picks(picks), copy)
        return data, ts

    def _get(
        self, winsize: Optional[float], rows: Optional[List[int]], copy: bool
    ) -> Tuple[NDArray[Any], NDArray[np.float64], int]:
        check_type(copy, bool, "copy")
        for _ in range(8):
            first, end = self._window_bounds(winsize)
            try:
                if copy:
                    data, ts = self._r.read(first, end)
                else:
                    data = self._r.window(first, end)
                    ts = self._r.stamps(first, end)
            except (OverrunError, _rtloop.TooOldError):
                continue  # lapped between choosing the window and reading it: choose again
            out = data.T
            return (out if rows is None else out[rows]), ts, first
        raise OverrunError(
            "the writer laps this window faster than it can be read; ask for a shorter winsize"
        )

    def to_mne(self, winsize: Optional[float] = None, picks: Any = None) -> Any:
        """The newest ``winsize`` seconds as an ``mne.io.RawArray`` (needs ``mne``).

        Channel names and types come from the stream (channels without an MNE type become
        ``misc``); channels in volts, millivolts, microvolts or nanovolts are scaled to volts
        as MNE expects; events in the window become annotations (``"type=value"``).
        """
        from ._mne import event_text, raw_array

        rows = self._picks(picks)
        data, ts, start = self._get(winsize, rows, True)
        idx = list(range(self._stream.n_channels)) if rows is None else rows
        names = [self._stream.ch_names[k] for k in idx]
        types = self._stream.ch_types
        units = [self._stream.ch_units[k] for k in idx]
        annotations = []
        sfreq = self._stream.sfreq
        n = data.shape[1]
        if n and sfreq > 0:
            for e in self.read_events(self._r.oldest_event, self._r.events_written):
                if start <= e.sample < start + n:
                    onset = (e.sample - start) / sfreq
                    annotations.append((onset, e.duration / sfreq, event_text(e.type, e.value)))
        return raw_array(
            data.T,
            self._stream.sfreq,
            names,
            [types[k] for k in idx] if types else [],
            units,
            annotations,
        )

    @staticmethod
    def check(view: NDArray[Any]) -> None:
        """Raise :class:`~rtloop.OverrunError` if the writer may have overwritten part of
        a zero-copy view (from :meth:`window` or :meth:`latest`, or a slice of one) since
        it was made. Call it after using the data."""
        _window_base(view).check()

    @staticmethod
    def valid(view: NDArray[Any]) -> bool:
        """Whether a zero-copy view was intact until now (see :meth:`check`)."""
        return _window_base(view).valid()

    def wait(self, until: int, timeout: Optional[float] = None) -> int:
        """Block until at least ``until`` samples were written; returns :attr:`written`.

        The wait releases the GIL and Ctrl-C interrupts it.

        Raises
        ------
        TimeoutError
            ``timeout`` seconds passed first.
        WriterDeadError
            The writer's process died first.
        WriterClosedError
            The writer closed the stream cleanly before ``until`` samples were written.
        """
        return self._r.wait(ensure_int(until, "until"), ensure_timeout(timeout))

    def seek(self, sample: int) -> None:
        """Move the cursor to absolute sample index ``sample``, at most :attr:`written`
        (a sample not written yet raises ``NotYetWrittenError``: :meth:`wait` for it
        first)."""
        self._r.seek(ensure_int(sample, "sample"))

    def pull_events(self) -> List[Event]:
        """Events pushed since the last call (or since this reader registered).

        Raises
        ------
        OverrunError
            Events were overwritten before they were read.
        """
        return [_event(t) for t in self._r.pull_events()]

    def read_events(self, first: int, end: int) -> List[Event]:
        """Events ``[first, end)`` by index."""
        first, end = ensure_int(first, "first"), ensure_int(end, "end")
        return [_event(t) for t in self._r.read_events(first, end)]

    @property
    def events_written(self) -> int:
        """Events pushed so far."""
        return self._r.events_written

    def writer_liveness(self) -> dict[str, Any]:
        """The writer's state (see :meth:`Stream.writer_liveness`)."""
        return self._r.writer_liveness()

    @property
    def writer_alive(self) -> bool:
        """Whether a writer holds the stream and its process is alive."""
        return bool(self._r.writer_liveness()["state"] == "active")

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._r.closed

    def close(self) -> None:
        """Unregister; a lossless reader then no longer holds the writer back."""
        self._r.close()

    def __enter__(self) -> "Reader":
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[Tuple[NDArray[Any], NDArray[np.float64]]]:
        """Chunks as they come (``pull_chunk(timeout=None)``), until the writer closes the
        stream and every sample it wrote was delivered; a dead writer raises
        :class:`~rtloop.WriterDeadError`."""
        while True:
            try:
                yield self.pull_chunk(timeout=None)
            except WriterClosedError:
                return

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"cursor {self.cursor}"
        return f"<Reader ({self.mode}) of {self._stream.name!r}, {state}>"
