"""A FieldTrip realtime buffer client (protocol version 1): rtloop's Rust client, from Python.

Works with ``rtloop serve`` and with any FieldTrip buffer server (the reference C ``buffer``,
the Java server, eegsynth's Python server). Data come back as numpy arrays shaped
``(samples, channels)``; sample and event indices are 0-based and inclusive, as in the
protocol::

    import numpy as np
    from rtloop.fieldtrip import Client

    c = Client()
    c.connect("localhost", 1972)                 # or c.connect("unix:/tmp/ft.sock")
    c.put_header(4, 1000.0, "float32", labels=["Fz", "Cz", "Pz", "Oz"])
    c.put_data(np.zeros((10, 4), np.float32))
    x = c.get_data(0, 9)                         # (10, 4) float32
    c.close()

The FieldTrip.py spellings (``getHeader``, ``putData``, ``getData([start, end])``, ...) are
there too, so scripts written for FieldTrip.py run unchanged.

The protocol (sockets, messages, replies, errors and why a request was refused) is the Rust
client of ``crates/rtloop-fieldtrip`` (``rtloop._rtloop.FieldTripClient``); this module turns
Python arguments and numpy arrays into what it takes. The protocol's numbers (``PUT_HDR``,
``DATATYPE_FLOAT32``, ... here) and the encoding of event types and values are that crate's
codec's too. Requests go out in one ``writev`` with
the samples taken from the array's own memory; GET_DAT's samples are read from the socket
straight into the array that is returned. Every call that waits releases the GIL, and Ctrl-C
ends a wait (closing the connection). Everything is little-endian, the byte order of every
machine rtloop runs on. TCP_NODELAY is set, so small requests are not held back.

A ``Client`` is one connection and is not thread-safe: give each thread its own.
"""

from __future__ import annotations

import atexit
import math
import weakref
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Type, Union

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rtloop import _rtloop
from rtloop._rtloop import FieldTripError

__all__ = ["DATATYPES", "Client", "Event", "FieldTripError", "Header", "Server"]

# FieldTrip.py's names of the protocol's numbers, for scripts that use them. The numbers
# are the Rust codec's (rtloop_fieldtrip::codec), which speaks the protocol.
_CMD = _rtloop.FIELDTRIP_COMMANDS
_CHUNK = _rtloop.FIELDTRIP_CHUNKS
_TYPE = {name: code for code, (name, _size) in _rtloop.FIELDTRIP_DATATYPES.items()}


def _named(table: Dict[str, int], prefix: str, names: str) -> Tuple[int, ...]:
    return tuple(table[prefix + n] for n in names.split())


VERSION = _rtloop.FIELDTRIP_VERSION
PUT_HDR, PUT_DAT, PUT_EVT, PUT_OK, PUT_ERR = _named(_CMD, "PUT_", "HDR DAT EVT OK ERR")
GET_HDR, GET_DAT, GET_EVT, GET_OK, GET_ERR = _named(_CMD, "GET_", "HDR DAT EVT OK ERR")
FLUSH_HDR, FLUSH_DAT, FLUSH_EVT, FLUSH_OK, FLUSH_ERR = _named(_CMD, "FLUSH_", "HDR DAT EVT OK ERR")
WAIT_DAT, WAIT_OK, WAIT_ERR = _named(_CMD, "WAIT_", "DAT OK ERR")
PUT_HDR_NORESPONSE, PUT_DAT_NORESPONSE, PUT_EVT_NORESPONSE = _named(
    _CMD, "PUT_", "HDR_NORESPONSE DAT_NORESPONSE EVT_NORESPONSE"
)

#: Header chunk types (the CHANNEL_NAMES chunk carries the labels).
CHUNK_UNSPECIFIED, CHUNK_CHANNEL_NAMES, CHUNK_CHANNEL_FLAGS, CHUNK_RESOLUTIONS = _named(
    _CHUNK, "", "UNSPECIFIED CHANNEL_NAMES CHANNEL_FLAGS RESOLUTIONS"
)
CHUNK_ASCII_KEYVAL, CHUNK_NIFTI1, CHUNK_SIEMENS_AP, CHUNK_CTF_RES4 = _named(
    _CHUNK, "", "ASCII_KEYVAL NIFTI1 SIEMENS_AP CTF_RES4"
)
CHUNK_NEUROMAG_HEADER, CHUNK_NEUROMAG_ISOTRAK, CHUNK_NEUROMAG_HPIRESULT = _named(
    _CHUNK, "NEUROMAG_", "HEADER ISOTRAK HPIRESULT"
)

#: FieldTrip data type codes (FieldTrip.py's names).
(DATATYPE_CHAR,) = _named(_TYPE, "", "char")
DATATYPE_UINT8, DATATYPE_UINT16, DATATYPE_UINT32, DATATYPE_UINT64 = _named(_TYPE, "uint", "8 16 32 64")
DATATYPE_INT8, DATATYPE_INT16, DATATYPE_INT32, DATATYPE_INT64 = _named(_TYPE, "int", "8 16 32 64")
DATATYPE_FLOAT32, DATATYPE_FLOAT64 = _named(_TYPE, "float", "32 64")

#: FieldTrip sample type codes and their numpy dtypes. Code 0 (char) is for event text only.
DATATYPES: Dict[int, np.dtype[Any]] = {
    code: np.dtype(name).newbyteorder("<")
    for code, (name, _size) in _rtloop.FIELDTRIP_DATATYPES.items()
    if code != DATATYPE_CHAR
}
_U32 = 0xFFFFFFFF
_I32 = (-(2**31), 2**31 - 1)


@dataclass
class Header:
    """What GET_HDR returns.

    ``n_samples`` and ``n_events`` count what was written since the last PUT_HDR or flush
    (the buffer may keep fewer). ``chunks`` maps each chunk type to its bytes, exactly as
    the writer sent them; ``labels`` are decoded from the CHANNEL_NAMES chunk (type 1).
    """

    n_channels: int
    n_samples: int
    n_events: int
    fsample: float
    data_type: np.dtype[Any]
    labels: List[str] = field(default_factory=list)
    chunks: Dict[int, bytes] = field(default_factory=dict)

    # FieldTrip.py's names
    @property
    def nChannels(self) -> int:  # noqa: N802
        return self.n_channels

    @property
    def nSamples(self) -> int:  # noqa: N802
        return self.n_samples

    @property
    def nEvents(self) -> int:  # noqa: N802
        return self.n_events

    @property
    def fSample(self) -> float:  # noqa: N802
        return self.fsample

    @property
    def dataType(self) -> int:  # noqa: N802
        """The FieldTrip type code (9 for float32, ...; 0 for anything else)."""
        try:
            return _dtype_code(self.data_type)
        except (TypeError, ValueError):
            return DATATYPE_CHAR


@dataclass
class Event:
    """A FieldTrip event.

    ``type`` and ``value`` are ``str`` (sent as char), ``bytes`` (sent as char, for text
    that is not UTF-8; such text also comes back as ``bytes``), or numbers / numpy arrays of
    a FieldTrip dtype (a numeric value of one element comes back as a Python scalar).
    ``sample = -1`` asks the server to fill in the current sample. ``offset`` and
    ``duration`` are in samples.
    """

    type: Any = ""
    value: Any = ""
    sample: int = -1
    offset: int = 0
    duration: int = 0


def _dtype_code(data_type: Any) -> int:
    """The FieldTrip code of a numpy dtype (or of a code), or ValueError/TypeError."""
    return _rtloop.fieldtrip_dtype_code(data_type)


def _u32(x: Any, what: str) -> int:
    try:
        v = int(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what} must be an integer, got {x!r}") from e
    if not 0 <= v <= _U32:
        raise ValueError(f"{what} must be in 0..{_U32} (an unsigned 32-bit field), got {v}")
    return v


def _i32(x: Any, what: str) -> int:
    try:
        v = int(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what} must be an integer, got {x!r}") from e
    if not _I32[0] <= v <= _I32[1]:
        raise ValueError(f"{what} must fit a signed 32-bit field ({_I32[0]}..{_I32[1]}), got {v}")
    return v


def _as_event(e: Any, i: int) -> Event:
    if isinstance(e, Event):
        return e
    try:
        if isinstance(e, dict):
            return Event(**e)
        if isinstance(e, (tuple, list)):
            if not 3 <= len(e) <= 5:
                raise TypeError(f"a tuple of {len(e)} fields")
            return Event(*e)
    except TypeError as err:
        raise TypeError(
            f"event {i} ({e!r}) is not an event: give Event objects, dicts with the keys "
            f"type, value, sample, offset, duration, or (type, value, sample[, offset, duration]) "
            f"tuples ({err})"
        ) from None
    # anything else (FieldTrip.py's Event, a namedtuple-like object) by its attributes
    if all(hasattr(e, k) for k in ("type", "value", "sample")):
        return Event(e.type, e.value, e.sample, getattr(e, "offset", 0), getattr(e, "duration", 0))
    raise TypeError(
        f"event {i} is a {type(e).__name__}; give Event objects, dicts with the keys type, value, "
        "sample, offset, duration, or (type, value, sample[, offset, duration]) tuples"
    )


def _parse_address(host: str, port: int) -> Tuple[str, int]:
    """"host", "host:port", "buffer://host:port", "tcp://host:port", "[::1]:port"."""
    return _rtloop.fieldtrip_address(host, port)


class Client:
    """One connection to a FieldTrip buffer, over TCP or a UNIX-domain socket.

    ``Client()`` is not connected; call :meth:`connect` (or use :meth:`open`). Use it as a
    context manager, or call :meth:`close`, to close the socket.
    """

    def __init__(self) -> None:
        self._native: Optional[_rtloop.FieldTripClient] = None
        self._addr = ""

    # -- connection ---------------------------------------------------------------------------
    @classmethod
    def open(cls, address: str = "localhost:1972") -> "Client":
        """A connected client: ``"host:port"``, ``"buffer://host:port"``, ``"tcp://host:port"``
        or ``"unix:/path/to.sock"``."""
        c = cls()
        c.connect(address)
        return c

    def connect(self, host: str = "localhost", port: int = 1972, *, path: Optional[str] = None) -> None:
        """Connect over TCP to ``host:port``, or over a UNIX socket (``path=...`` or
        ``host="unix:/path"``). ``host`` may also be ``"host:port"`` or ``"buffer://host:port"``.
        A previous connection of this client is closed first.

        Raises ``ConnectionError`` naming the address if nobody answers there.
        """
        self.close()
        if path is None and host.startswith("unix:"):
            path = host[len("unix:") :]
        self._native = _rtloop.FieldTripClient(host, int(port), path)
        self._addr = self._native.address

    def close(self) -> None:
        """Close the connection (idempotent)."""
        n, self._native = self._native, None
        if n is not None:
            n.close()

    disconnect = close

    @property
    def connected(self) -> bool:
        """Whether the socket is open (the server may still have closed its end)."""
        return self._native is not None and self._native.connected

    @property
    def isConnected(self) -> bool:  # noqa: N802
        return self.connected

    @property
    def address(self) -> str:
        """``"host:port"`` or ``"unix:/path"`` of the server ("" before connect)."""
        return self._addr

    def __enter__(self) -> "Client":
        return self

    def __exit__(
        self, t: Optional[Type[BaseException]], v: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return f"rtloop.fieldtrip.Client({self._addr if self.connected else 'not connected'})"

    def _c(self) -> _rtloop.FieldTripClient:
        """The open connection, or ConnectionError (a lost one was closed)."""
        n = self._native
        if n is None or not n.connected:
            where = f" to {self._addr}" if self._addr else ""
            raise ConnectionError(f"not connected{where}: call connect() first")
        return n

    # -- header -------------------------------------------------------------------------------
    def put_header(
        self,
        n_channels: int,
        fsample: float,
        data_type: Any,
        labels: Optional[Sequence[str]] = None,
        chunks: Optional[Union[Dict[int, bytes], Iterable[Tuple[int, bytes]]]] = None,
    ) -> None:
        """PUT_HDR: (re)start the buffer. Samples and events restart at 0.

        Parameters
        ----------
        n_channels : int
            At least 1.
        fsample : float
            Sampling rate in Hz.
        data_type : numpy dtype or FieldTrip code
            One of uint8, uint16, uint32, uint64, int8, int16, int32, int64, float32,
            float64 (codes 1..10).
        labels : list of str, optional
            One per channel; sent as the CHANNEL_NAMES chunk (NUL-terminated strings).
        chunks : dict {type: bytes} or iterable of (type, bytes), optional
            Other header chunks, sent and returned byte for byte (a CHANNEL_NAMES chunk here
            is replaced by ``labels`` if both are given).
        """
        nch = _u32(n_channels, "n_channels")
        code = _dtype_code(data_type)
        try:
            fs = float(fsample)
        except (TypeError, ValueError):
            raise TypeError(f"fsample must be a number (Hz), got {fsample!r}") from None
        if not math.isfinite(fs) or abs(fs) > 3.4e38:
            raise ValueError(f"fsample must be a finite float32 number of Hz, got {fsample!r}")
        names: List[str] = []
        if labels is not None and len(labels) > 0:
            if isinstance(labels, str):
                raise TypeError("labels must be a list of str, one per channel, not a single str")
            names = [str(x) for x in labels]
        pairs: List[Tuple[int, bytes]] = []
        for item in list(chunks.items()) if isinstance(chunks, dict) else list(chunks or []):
            try:
                ctype, data = item
            except (TypeError, ValueError):
                raise TypeError(f"chunks must be {{type: bytes}} or (type, bytes) pairs, got {item!r}") from None
            ct = _u32(ctype, "chunk type")
            if isinstance(data, str):
                raise TypeError(f"chunk {ct} must be bytes (encode text yourself), got str")
            pairs.append((ct, bytes(data)))
        self._c().put_header(nch, fs, code, names, pairs)

    def get_header(self) -> Header:
        """GET_HDR: shape, counts now, labels and chunks. FieldTripError if there is none."""
        nch, ns, ne, fs, code, labels, pairs = self._c().get_header()
        chunks = dict(pairs)
        dt = DATATYPES.get(code, np.dtype("S1") if code == DATATYPE_CHAR else np.dtype("V1"))
        return Header(nch, ns, ne, float(fs), dt, labels, chunks)

    # -- data ---------------------------------------------------------------------------------
    def put_data(self, data: ArrayLike, *, response: bool = True) -> None:
        """PUT_DAT: append samples.

        ``data`` is a 2-D ``(samples, channels)`` array, or a 1-D array (one sample), of a
        FieldTrip dtype (see :data:`DATATYPES`); it is sent from its own memory (a copy is
        made only if it is not C-contiguous little-endian). ``response=False`` sends
        PUT_DAT_NORESPONSE: nothing comes back, not even an error.
        """
        a = np.asarray(data)
        if a.ndim == 1:
            a = a.reshape(1, -1)
        if a.ndim != 2:
            raise ValueError(f"data must be 2-D (samples, channels) or 1-D (one sample), got shape {a.shape}")
        code = _dtype_code(a.dtype)
        a = np.ascontiguousarray(a, dtype=DATATYPES[code])
        self._c().put_data(a.reshape(-1).view(np.uint8), a.shape[1], code, response)

    def get_data(self, start: Optional[int] = None, end: Optional[int] = None) -> NDArray[Any]:
        """GET_DAT: samples ``start..end`` (0-based, **inclusive**) as ``(samples, channels)``.

        No arguments: everything the buffer keeps. ``end=None``: up to the newest sample.
        ``start = end + 1`` gives an empty ``(0, channels)`` array. Samples not written yet,
        or no longer kept, raise FieldTripError.
        """
        b = None if start is None else _u32(start, "start")
        e = None if end is None else _u32(end, "end")
        return self._c().get_data(b, e)

    # -- events -------------------------------------------------------------------------------
    def put_events(self, events: Any, *, response: bool = True) -> None:
        """PUT_EVT: one event or several in one request.

        ``events`` is an :class:`Event`, a dict with its keys, a ``(type, value, sample[,
        offset, duration])`` tuple, or a list of those. ``sample=-1`` asks the server to fill
        in the current sample. ``response=False`` sends PUT_EVT_NORESPONSE. An empty list
        sends nothing.
        """
        if isinstance(events, (Event, dict)) or (
            isinstance(events, tuple) and events and not isinstance(events[0], (Event, dict, tuple, list))
        ):
            events = [events]
        try:
            items = list(events)
        except TypeError:
            items = [events]
        wire = []
        for i, raw in enumerate(items):
            e = _as_event(raw, i)
            sample = _i32(e.sample, f"event {i} sample")
            offset = _i32(e.offset, f"event {i} offset")
            duration = _i32(e.duration, f"event {i} duration")
            wire.append((e.type, e.value, sample, offset, duration))
        # the types and values are encoded by the Rust codec (str and bytes as char, numbers
        # as their FieldTrip type)
        self._c().put_events(wire, response)

    def get_events(self, start: Optional[int] = None, end: Optional[int] = None) -> List[Event]:
        """GET_EVT: events ``start..end`` (0-based, inclusive); no arguments: every event the
        buffer keeps (FieldTripError if there are none, as from the reference server).
        ``end=None`` with a start: up to the newest event (one WAIT_DAT first asks how many
        there are)."""
        b = None if start is None else _u32(start, "start")
        e = None if end is None else _u32(end, "end")
        return [Event(*fields) for fields in self._c().get_events(b, e)]

    # -- waiting and flushing -----------------------------------------------------------------
    def wait(self, nsamples: int, nevents: int, timeout_ms: int) -> Tuple[int, int]:
        """WAIT_DAT: block until there are more than ``nsamples`` samples or more than
        ``nevents`` events (strictly greater), or ``timeout_ms`` passes (0: answer at once).
        Returns the current ``(samples, events)``."""
        ns, ne, ms = _u32(nsamples, "nsamples"), _u32(nevents, "nevents"), _u32(timeout_ms, "timeout_ms")
        return self._c().wait(ns, ne, ms)

    def poll(self) -> Tuple[int, int]:
        """The current ``(samples, events)`` without waiting (WAIT_DAT with timeout 0)."""
        return self.wait(0, 0, 0)

    def flush_header(self) -> None:
        """FLUSH_HDR: delete the header, the samples and the events."""
        self._c().flush_header()

    def flush_data(self) -> None:
        """FLUSH_DAT: delete the samples (the count restarts at 0; header and events stay)."""
        self._c().flush_data()

    def flush_events(self) -> None:
        """FLUSH_EVT: delete the events (the count restarts at 0)."""
        self._c().flush_events()

    def flush(self, what: str = "data") -> None:
        """FLUSH_HDR, FLUSH_DAT or FLUSH_EVT: ``what`` is "header", "data" or "events"."""
        f = {"header": self.flush_header, "data": self.flush_data, "events": self.flush_events}.get(what)
        if f is None:
            raise ValueError(f"flush what {what!r}? allowed: header, data, events")
        f()

    # -- FieldTrip.py's names (GETs answer None / [] instead of raising, as there) ------------
    def getHeader(self) -> Optional[Header]:  # noqa: N802
        """FieldTrip.py: GET_HDR, None if there is no header."""
        try:
            return self.get_header()
        except FieldTripError:
            return None

    def putHeader(  # noqa: N802
        self, nChannels: int, fSample: float, dataType: Any, labels: Any = None, chunks: Any = None  # noqa: N803
    ) -> None:
        """FieldTrip.py: PUT_HDR."""
        self.put_header(nChannels, fSample, dataType, labels, chunks)

    def getData(self, index: Optional[Sequence[int]] = None) -> Optional[NDArray[Any]]:  # noqa: N802
        """FieldTrip.py: GET_DAT of ``index = [start, end]`` (inclusive), None if refused."""
        try:
            return self.get_data() if index is None else self.get_data(int(index[0]), int(index[1]))
        except FieldTripError:
            return None

    def putData(self, D: ArrayLike) -> None:  # noqa: N802,N803
        """FieldTrip.py: PUT_DAT."""
        self.put_data(D)

    def getEvents(self, index: Optional[Sequence[int]] = None) -> List[Event]:  # noqa: N802
        """FieldTrip.py: GET_EVT of ``index = [start, end]`` (inclusive), [] if refused."""
        try:
            return self.get_events() if index is None else self.get_events(int(index[0]), int(index[1]))
        except FieldTripError:
            return []

    def putEvents(self, E: Any) -> None:  # noqa: N802,N803
        """FieldTrip.py: PUT_EVT."""
        self.put_events(E)

    def flushHeader(self) -> None:  # noqa: N802
        """FieldTrip.py: FLUSH_HDR."""
        self.flush_header()

    def flushData(self) -> None:  # noqa: N802
        """FieldTrip.py: FLUSH_DAT."""
        self.flush_data()

    def flushEvents(self) -> None:  # noqa: N802
        """FieldTrip.py: FLUSH_EVT."""
        self.flush_events()


class Server:
    """A FieldTrip buffer server on an rtloop stream, in this process (``rtloop serve``'s
    server, on threads of its own that never need the GIL). Clients put a header and
    samples as to any FieldTrip buffer; the samples land in the stream ``stream``, where
    rtloop readers, models and recorders see them::

        with Server("ft", bind="127.0.0.1:0") as srv:     # port 0: a free port
            c = Client.open(srv.address)
            c.put_header(4, 1000.0, "float32")
            c.put_data(np.zeros((10, 4), np.float32))
            rtloop.Stream.open("ft").written                # 10

    Options are ``rtloop serve``'s: ``bind`` (``HOST:PORT``), ``tcp=False`` with ``unix=PATH``
    for a UNIX socket only, ``capacity`` (samples kept), ``max_bytes``, ``events``,
    ``max_message``, ``max_clients``, ``message_timeout`` (s), ``memory_mb``, ``poll``
    (``adaptive``, ``off`` or microseconds), ``pm_qos``, ``keep`` (keep the stream after
    stop). A bad option raises ``ValueError``; an address in use ``OSError``."""

    def __init__(
        self,
        stream: str = "fieldtrip",
        *,
        bind: str = "127.0.0.1:1972",
        tcp: bool = True,
        unix: Optional[str] = None,
        capacity: int = 600_000,
        max_bytes: int = 512 << 20,
        events: int = 1024,
        max_message: int = 1 << 30,
        max_clients: int = 256,
        message_timeout: float = 10.0,
        memory_mb: int = 2048,
        poll: Union[str, int] = "adaptive",
        pm_qos: bool = True,
        keep: bool = False,
    ) -> None:
        self._native = _rtloop.FieldTripServer(
            stream, bind, bool(tcp), unix, int(capacity), int(max_bytes), int(events), int(max_message),
            int(max_clients), float(message_timeout), int(memory_mb), str(poll), bool(pm_qos), bool(keep),
        )
        _RUNNING.add(self)

    @property
    def address(self) -> str:
        """What `Client.open` takes: ``"host:port"``, or ``"unix:/path"`` without TCP."""
        tcp = self._native.tcp_address
        if tcp is not None:
            return f"{tcp[0]}:{tcp[1]}"
        path = self._native.unix_path
        return "" if path is None else f"unix:{path}"

    @property
    def tcp_address(self) -> Optional[Tuple[str, int]]:
        return self._native.tcp_address

    @property
    def unix_path(self) -> Optional[str]:
        p = self._native.unix_path
        return None if p is None else str(p)

    @property
    def stream(self) -> str:
        return str(self._native.stream)

    @property
    def clients(self) -> int:
        """Clients connected now."""
        return int(self._native.clients)

    @property
    def running(self) -> bool:
        return bool(self._native.running)

    def stop(self) -> None:
        """Stop listening, close every connection (a client waiting in WAIT_DAT gets the
        connection closed at once) and wait for the connection threads, then close the buffer
        (the stream is removed unless ``keep``). Idempotent; also done at interpreter exit."""
        self._native.stop()
        _RUNNING.discard(self)

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<rtloop.fieldtrip.Server {self.address} stream={self.stream!r}{'' if self.running else ' (stopped)'}>"


# Servers still running when the interpreter exits are stopped while it still works: their
# connection threads log through Python's `logging` and must be gone before finalization.
_RUNNING: "weakref.WeakSet[Server]" = weakref.WeakSet()


@atexit.register
def _stop_running_servers() -> None:
    for srv in list(_RUNNING):
        srv.stop()
