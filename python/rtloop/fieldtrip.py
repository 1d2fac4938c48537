"""A FieldTrip realtime buffer client (protocol version 1), in Python.

Works with `rtloop serve` and with any FieldTrip buffer server (the reference C `buffer`,
the Java server, eegsynth's Python server). Data come back as numpy arrays shaped
``(samples, channels)``; sample and event indices are 0-based and inclusive, as in the
protocol.

    >>> from rtloop.fieldtrip import Client
    >>> c = Client()
    >>> c.connect("localhost", 1972)            # or c.connect("unix:/tmp/ft.sock")
    >>> c.put_header(4, 1000.0, "float32", labels=["Fz", "Cz", "Pz", "Oz"])
    >>> c.put_data(np.zeros((10, 4), np.float32))
    >>> x = c.get_data(0, 9)                     # (10, 4)

The FieldTrip.py spellings (``getHeader``, ``putData``, ``getData([start, end])``, ...) are
there too, so scripts written for FieldTrip.py run unchanged.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Type, Union

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["Client", "Header", "Event", "FieldTripError", "DATATYPES"]

VERSION = 1
PUT_HDR, PUT_DAT, PUT_EVT, PUT_OK, PUT_ERR = 0x0101, 0x0102, 0x0103, 0x0104, 0x0105
GET_HDR, GET_DAT, GET_EVT, GET_OK, GET_ERR = 0x0201, 0x0202, 0x0203, 0x0204, 0x0205
FLUSH_HDR, FLUSH_DAT, FLUSH_EVT, FLUSH_OK, FLUSH_ERR = 0x0301, 0x0302, 0x0303, 0x0304, 0x0305
WAIT_DAT, WAIT_OK, WAIT_ERR = 0x0402, 0x0404, 0x0405
CHUNK_CHANNEL_NAMES = 1

_NAMES = {
    PUT_HDR: "PUT_HDR", PUT_DAT: "PUT_DAT", PUT_EVT: "PUT_EVT", PUT_OK: "PUT_OK", PUT_ERR: "PUT_ERR",
    GET_HDR: "GET_HDR", GET_DAT: "GET_DAT", GET_EVT: "GET_EVT", GET_OK: "GET_OK", GET_ERR: "GET_ERR",
    FLUSH_HDR: "FLUSH_HDR", FLUSH_DAT: "FLUSH_DAT", FLUSH_EVT: "FLUSH_EVT", FLUSH_OK: "FLUSH_OK",
    FLUSH_ERR: "FLUSH_ERR", WAIT_DAT: "WAIT_DAT", WAIT_OK: "WAIT_OK", WAIT_ERR: "WAIT_ERR",
}

#: FieldTrip data type codes and their numpy dtypes (0 = char, used for text in events).
DATATYPES: Dict[int, np.dtype[Any]] = {
    1: np.dtype("<u1"), 2: np.dtype("<u2"), 3: np.dtype("<u4"), 4: np.dtype("<u8"),
    5: np.dtype("<i1"), 6: np.dtype("<i2"), 7: np.dtype("<i4"), 8: np.dtype("<i8"),
    9: np.dtype("<f4"), 10: np.dtype("<f8"),
}
_CODE = {dt.str: code for code, dt in DATATYPES.items()}
_ALLOWED = "uint8, uint16, uint32, uint64, int8, int16, int32, int64, float32, float64 (or codes 1..10)"

_WHY = {
    GET_DAT: "the samples are not, or no longer, in the buffer (or there is no header yet)",
    GET_EVT: "the events are not, or no longer, in the buffer (or there is no header yet)",
    GET_HDR: "there is no header yet (nothing was PUT_HDR, or it was flushed)",
    PUT_DAT: "the data do not match the header (channels, type) or there is no header yet",
    PUT_EVT: "the events are malformed or there is no header yet",
    PUT_HDR: "the header was refused (data type, channels or size)",
    WAIT_DAT: "there is no header yet",
    FLUSH_HDR: "there is no header to flush", FLUSH_DAT: "there is no header", FLUSH_EVT: "there is no header",
}


# what goes out on the socket: bytes, or a view of an array's memory (no copy)
_Buf = Union[bytes, bytearray, memoryview]


class FieldTripError(RuntimeError):
    """The server answered a request with an error reply."""


@dataclass
class Header:
    """What GET_HDR returns."""

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
        return _CODE[self.data_type.str]


@dataclass
class Event:
    """A FieldTrip event: ``type`` and ``value`` are ``str`` or numpy arrays (or scalars).
    ``sample = -1`` asks the server to fill in the current sample."""

    type: Any = ""
    value: Any = ""
    sample: int = -1
    offset: int = 0
    duration: int = 0


def _dtype_code(data_type: Any) -> int:
    if isinstance(data_type, (int, np.integer)) and not isinstance(data_type, bool):
        if int(data_type) in DATATYPES:
            return int(data_type)
        raise ValueError(f"data type code {data_type} is not a FieldTrip sample type; allowed: {_ALLOWED}")
    try:
        dt = np.dtype(data_type).newbyteorder("<")
    except TypeError as e:
        raise TypeError(f"data type {data_type!r} is not a dtype; allowed: {_ALLOWED}") from e
    if dt.str not in _CODE:
        raise ValueError(f"data type {np.dtype(data_type)} is not a FieldTrip sample type; allowed: {_ALLOWED}")
    return _CODE[dt.str]


def _encode_value(v: Any, what: str) -> Tuple[int, int, bytes]:
    """(type code, numel, bytes) of an event type or value."""
    if isinstance(v, str):
        b = v.encode("utf-8")
        return 0, len(b), b
    if isinstance(v, bytes):
        return 0, len(v), v
    a = np.asarray(v)
    if a.dtype.kind in "US":
        b = str(a).encode("utf-8")
        return 0, len(b), b
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)
    code = _dtype_code(a.dtype)
    a = np.ascontiguousarray(a.reshape(-1), dtype=DATATYPES[code])
    return code, a.size, a.tobytes()


def _decode_value(code: int, numel: int, raw: bytes) -> Any:
    if code == 0:
        return raw.decode("utf-8", errors="replace")
    a = np.frombuffer(raw, dtype=DATATYPES[code], count=numel).copy()
    return a.item() if a.size == 1 else a


class Client:
    """One connection to a FieldTrip buffer (TCP or UNIX socket)."""

    def __init__(self) -> None:
        self._sock: Optional[socket.socket] = None
        self._addr = ""
        self._header_cache: Optional[Tuple[int, int]] = None  # (n_channels, code) after put_header

    # -- connection ---------------------------------------------------------------------------
    @classmethod
    def open(cls, address: str) -> "Client":
        """Connect to ``"host:port"``, ``"buffer://host:port"``, ``"tcp://host:port"`` or
        ``"unix:/path"``."""
        c = cls()
        c.connect(address)
        return c

    def connect(self, host: str = "localhost", port: int = 1972, *, path: Optional[str] = None) -> None:
        """Connect over TCP (``host``, ``port``), or over a UNIX socket (``path=...`` or
        ``host="unix:/path"``). ``host`` may also be ``"host:port"`` or ``"buffer://host:port"``."""
        self.close()
        if path is None and host.startswith("unix:"):
            path = host[len("unix:"):]
        if path is not None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(path)
            except OSError as e:
                s.close()
                raise ConnectionError(f"cannot connect to the FieldTrip buffer at unix:{path}: {e}") from e
            self._addr = f"unix:{path}"
        else:
            for prefix in ("buffer://", "tcp://"):
                if host.startswith(prefix):
                    host = host[len(prefix):]
            if ":" in host and not host.startswith("["):
                host, p = host.rsplit(":", 1)
                port = int(p)
            try:
                s = socket.create_connection((host, port))
            except OSError as e:
                raise ConnectionError(f"cannot connect to the FieldTrip buffer at {host}:{port}: {e}") from e
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._addr = f"{host}:{port}"
        self._sock = s

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    disconnect = close

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def __enter__(self) -> "Client":
        return self

    def __exit__(
        self, t: Optional[Type[BaseException]], v: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    # -- plumbing -----------------------------------------------------------------------------
    def _send(self, command: int, *parts: _Buf) -> None:
        if self._sock is None:
            raise ConnectionError("not connected: call connect() first")
        size = sum(memoryview(p).nbytes for p in parts)
        try:
            self._sock.sendmsg([struct.pack("<HHI", VERSION, command, size), *parts])
        except OSError as e:
            raise ConnectionError(f"the FieldTrip buffer at {self._addr} closed the connection: {e}") from e

    def _recv_exact(self, n: int) -> bytearray:
        assert self._sock is not None
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self._sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionError(f"the FieldTrip buffer at {self._addr} closed the connection")
            got += k
        return buf

    def _call(self, command: int, ok: int, *parts: _Buf, what: str = "") -> bytearray:
        self._send(command, *parts)
        version, reply, size = struct.unpack("<HHI", self._recv_exact(8))
        if version != VERSION:
            raise ConnectionError(f"{self._addr} answered with protocol version {version}, not {VERSION}")
        payload = self._recv_exact(size) if size else bytearray()
        if reply != ok:
            name = _NAMES.get(command, hex(command))
            raise FieldTripError(
                f"{name}{what} refused by the server at {self._addr} ({_NAMES.get(reply, hex(reply))}): "
                f"{_WHY.get(command, 'see the server log')}"
            )
        return payload

    # -- header -------------------------------------------------------------------------------
    def put_header(
        self,
        n_channels: int,
        fsample: float,
        data_type: Any,
        labels: Optional[Sequence[str]] = None,
        chunks: Optional[Union[Dict[int, bytes], Iterable[Tuple[int, bytes]]]] = None,
    ) -> None:
        """PUT_HDR: (re)start the buffer with this shape. Resets samples and events."""
        if int(n_channels) < 1:
            raise ValueError(f"n_channels must be at least 1, got {n_channels}")
        code = _dtype_code(data_type)
        extra = b""
        if labels is not None and len(labels) > 0:
            if len(labels) != n_channels:
                raise ValueError(f"{len(labels)} labels for {n_channels} channels; give one per channel")
            names = b"".join(str(x).encode("utf-8") + b"\0" for x in labels)
            extra += struct.pack("<II", CHUNK_CHANNEL_NAMES, len(names)) + names
        items = chunks.items() if isinstance(chunks, dict) else (chunks or [])
        for ctype, data in items:
            if labels and ctype == CHUNK_CHANNEL_NAMES:
                continue
            extra += struct.pack("<II", int(ctype), len(data)) + bytes(data)
        hdef = struct.pack("<IIIfII", int(n_channels), 0, 0, float(fsample), code, len(extra))
        self._call(PUT_HDR, PUT_OK, hdef, extra)
        self._header_cache = (int(n_channels), code)

    def get_header(self) -> Header:
        """GET_HDR: shape, current counts, labels and chunks."""
        p = self._call(GET_HDR, GET_OK)
        nch, ns, ne, fs, code, size = struct.unpack_from("<IIIfII", p, 0)
        chunks: Dict[int, bytes] = {}
        at, end = 24, min(24 + size, len(p))
        while at + 8 <= end:
            ctype, clen = struct.unpack_from("<II", p, at)
            at += 8
            chunks[ctype] = bytes(p[at:at + clen])
            at += clen
        labels: List[str] = []
        if CHUNK_CHANNEL_NAMES in chunks:
            parts = chunks[CHUNK_CHANNEL_NAMES].split(b"\0")
            if len(parts) >= nch:
                labels = [x.decode("utf-8", errors="replace") for x in parts[:nch]]
        self._header_cache = (nch, code)
        return Header(nch, ns, ne, fs, DATATYPES.get(code, np.dtype("u1")), labels, chunks)

    # -- data ---------------------------------------------------------------------------------
    def put_data(self, data: ArrayLike, *, response: bool = True) -> None:
        """PUT_DAT: append samples, a 2-D ``(samples, channels)`` array (a 1-D array is one
        sample). ``response=False`` sends PUT_DAT_NORESPONSE (nothing comes back)."""
        a = np.asarray(data)
        if a.ndim == 1:
            a = a.reshape(1, -1)
        if a.ndim != 2:
            raise ValueError(f"data must be 2-D (samples, channels) or 1-D (one sample), got shape {a.shape}")
        code = _dtype_code(a.dtype)
        if self._header_cache is not None and self._header_cache[0] != a.shape[1]:
            raise ValueError(f"data have {a.shape[1]} channels, the header {self._header_cache[0]}")
        a = np.ascontiguousarray(a, dtype=DATATYPES[code])
        ddef = struct.pack("<IIII", a.shape[1], a.shape[0], code, a.nbytes)
        if response:
            self._call(PUT_DAT, PUT_OK, ddef, a.data.cast("B"))
        else:
            self._send(PUT_DAT + 0x0400, ddef, a.data.cast("B"))

    def get_data(self, start: Optional[int] = None, end: Optional[int] = None) -> NDArray[Any]:
        """GET_DAT: samples ``start..end`` (0-based, inclusive) as ``(samples, channels)``;
        no arguments: everything the buffer keeps. ``end=None`` with a start: up to the newest."""
        if start is None and end is None:
            p = self._call(GET_DAT, GET_OK)
            what = ""
        else:
            b = 0 if start is None else int(start)
            e = 0xFFFFFFFF if end is None else int(end)
            if b < 0 or e < 0:
                raise ValueError(f"sample indices are 0-based and >= 0, got [{start}, {end}]")
            p = self._call(GET_DAT, GET_OK, struct.pack("<II", b, e), what=f" [{b}, {end}]")
        nch, ns, code, size = struct.unpack_from("<IIII", p, 0)
        if code not in DATATYPES:
            raise ConnectionError(f"{self._addr} sent data of unknown type {code}")
        return np.frombuffer(p, dtype=DATATYPES[code], count=nch * ns, offset=16).reshape(ns, nch)

    # -- events -------------------------------------------------------------------------------
    def put_events(self, events: Union[Event, Dict[str, Any], Sequence[Any]], *, response: bool = True) -> None:
        """PUT_EVT: one event or several (``Event``, dicts with the same keys, or
        ``(type, value, sample[, offset, duration])`` tuples)."""
        if isinstance(events, (Event, dict)) or (
            isinstance(events, tuple) and events and not isinstance(events[0], (Event, dict, tuple, list))
        ):
            events = [events]
        parts: List[bytes] = []
        for i, e in enumerate(events):
            if isinstance(e, dict):
                e = Event(**e)
            elif isinstance(e, (tuple, list)):
                e = Event(*e)
            if not isinstance(e, Event):
                raise TypeError(f"event {i} is a {type(e).__name__}; give Event objects, dicts or tuples")
            tt, tn, tb = _encode_value(e.type, "type")
            vt, vn, vb = _encode_value(e.value, "value")
            parts.append(
                struct.pack("<IIIIiiiI", tt, tn, vt, vn, int(e.sample), int(e.offset), int(e.duration), len(tb) + len(vb))
                + tb + vb
            )
        payload = b"".join(parts)
        if response:
            self._call(PUT_EVT, PUT_OK, payload)
        else:
            self._send(PUT_EVT + 0x0400, payload)

    def get_events(self, start: Optional[int] = None, end: Optional[int] = None) -> List[Event]:
        """GET_EVT: events ``start..end`` (0-based, inclusive); no arguments: all kept."""
        if start is None and end is None:
            p = self._call(GET_EVT, GET_OK)
        else:
            b = 0 if start is None else int(start)
            e = 0xFFFFFFFF if end is None else int(end)
            p = self._call(GET_EVT, GET_OK, struct.pack("<II", b, e), what=f" [{b}, {end}]")
        out: List[Event] = []
        at = 0
        while at + 32 <= len(p):
            tt, tn, vt, vn, sample, offset, duration, size = struct.unpack_from("<IIIIiiiI", p, at)
            at += 32
            tw = 1 if tt == 0 else DATATYPES[tt].itemsize
            vw = 1 if vt == 0 else DATATYPES[vt].itemsize
            body = bytes(p[at:at + size])
            at += size
            out.append(
                Event(
                    _decode_value(tt, tn, body[: tn * tw]),
                    _decode_value(vt, vn, body[tn * tw: tn * tw + vn * vw]),
                    sample,
                    offset,
                    duration,
                )
            )
        return out

    # -- waiting and flushing -----------------------------------------------------------------
    def wait(self, nsamples: int, nevents: int, timeout_ms: int) -> Tuple[int, int]:
        """WAIT_DAT: block until there are more than ``nsamples`` samples or more than
        ``nevents`` events, or ``timeout_ms`` passes. Returns the current (samples, events)."""
        p = self._call(WAIT_DAT, WAIT_OK, struct.pack("<III", int(nsamples), int(nevents), int(timeout_ms)))
        ns, ne = struct.unpack_from("<II", p, 0)
        return int(ns), int(ne)

    def poll(self) -> Tuple[int, int]:
        """The current (samples, events), without waiting."""
        return self.wait(0, 0, 0)

    def flush_header(self) -> None:
        """FLUSH_HDR: delete the header, the samples and the events."""
        self._call(FLUSH_HDR, FLUSH_OK)
        self._header_cache = None

    def flush_data(self) -> None:
        """FLUSH_DAT: delete the samples (the count restarts at 0)."""
        self._call(FLUSH_DAT, FLUSH_OK)

    def flush_events(self) -> None:
        """FLUSH_EVT: delete the events."""
        self._call(FLUSH_EVT, FLUSH_OK)

    def flush(self, what: str = "data") -> None:
        """FLUSH_HDR, FLUSH_DAT or FLUSH_EVT: ``what`` is "header", "data" or "events"."""
        f = {"header": self.flush_header, "data": self.flush_data, "events": self.flush_events}.get(what)
        if f is None:
            raise ValueError(f"flush what {what!r}? allowed: header, data, events")
        f()

    # -- FieldTrip.py's names -----------------------------------------------------------------
    def getHeader(self) -> Optional[Header]:  # noqa: N802
        try:
            return self.get_header()
        except FieldTripError:
            return None

    def putHeader(self, nChannels: int, fSample: float, dataType: Any, labels: Any = None, chunks: Any = None) -> None:  # noqa: N802,N803
        self.put_header(nChannels, fSample, dataType, labels, chunks)

    def getData(self, index: Optional[Sequence[int]] = None) -> Optional[NDArray[Any]]:  # noqa: N802
        try:
            return self.get_data() if index is None else self.get_data(int(index[0]), int(index[1]))
        except FieldTripError:
            return None

    def putData(self, D: ArrayLike) -> None:  # noqa: N802,N803
        self.put_data(D)

    def getEvents(self, index: Optional[Sequence[int]] = None) -> List[Event]:  # noqa: N802
        try:
            return self.get_events() if index is None else self.get_events(int(index[0]), int(index[1]))
        except FieldTripError:
            return []

    def putEvents(self, E: Any) -> None:  # noqa: N802,N803
        self.put_events(E)

    def flushHeader(self) -> None:  # noqa: N802
        self.flush_header()

    def flushData(self) -> None:  # noqa: N802
        self.flush_data()

    def flushEvents(self) -> None:  # noqa: N802
        self.flush_events()

    def __repr__(self) -> str:
        return f"rtloop.fieldtrip.Client({self._addr or 'not connected'})"
