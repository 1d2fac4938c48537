"""`rtloop serve` spoken to in raw bytes, written only from the FieldTrip buffer protocol
(version 1: an 8-byte prefix `uint16 version, uint16 command, uint32 bufsize`, packed structs
in the sender's byte order). No rtloop client code is used here: every request is built with
`struct.pack` and every reply is checked byte for byte.

Each bad input is followed by a check, over a fresh connection, that what was stored before
(header with its chunks, samples, events) is still there byte for byte.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional, Tuple

import pytest
from conftest import FieldTripServer

# commands (message.h)
PUT_HDR, PUT_DAT, PUT_EVT, PUT_OK, PUT_ERR = 0x0101, 0x0102, 0x0103, 0x0104, 0x0105
GET_HDR, GET_DAT, GET_EVT, GET_OK, GET_ERR = 0x0201, 0x0202, 0x0203, 0x0204, 0x0205
FLUSH_HDR, FLUSH_DAT, FLUSH_EVT, FLUSH_OK, FLUSH_ERR = 0x0301, 0x0302, 0x0303, 0x0304, 0x0305
WAIT_DAT, WAIT_OK, WAIT_ERR = 0x0402, 0x0404, 0x0405
PUT_HDR_NR, PUT_DAT_NR, PUT_EVT_NR = 0x0501, 0x0502, 0x0503
# data types
CHAR, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FLOAT32, FLOAT64 = range(11)
WORD = {CHAR: "c", UINT8: "B", UINT16: "H", UINT32: "I", UINT64: "Q", INT8: "b", INT16: "h",
        INT32: "i", INT64: "q", FLOAT32: "f", FLOAT64: "d"}  # fmt: skip
ALL = 0xFFFFFFFF

MAX_MESSAGE = 65536
SERVER_ARGS = ("--max-message", str(MAX_MESSAGE), "--capacity", "10000", "--events", "16", "--message-timeout", "2")


# -- message builders ---------------------------------------------------------------------------
def prefix(command: int, bufsize: int, bo: str = "<", version: int = 1) -> bytes:
    return struct.pack(bo + "HHI", version, command, bufsize)


def msg(command: int, payload: bytes = b"", bo: str = "<") -> bytes:
    return prefix(command, len(payload), bo) + payload


def chunk(ctype: int, data: bytes, bo: str = "<") -> bytes:
    return struct.pack(bo + "II", ctype, len(data)) + data


def headerdef(nchans: int, fsample: float, dtype: int, chunks: bytes = b"", bo: str = "<", ns: int = 0, ne: int = 0) -> bytes:
    return struct.pack(bo + "IIIfII", nchans, ns, ne, fsample, dtype, len(chunks)) + chunks


def samples(dtype: int, values: List[Any], bo: str = "<") -> bytes:
    return struct.pack(f"{bo}{len(values)}{WORD[dtype]}", *values)


def datadef(nchans: int, nsamples: int, dtype: int, data: bytes, bo: str = "<", bufsize: Optional[int] = None) -> bytes:
    n = len(data) if bufsize is None else bufsize
    return struct.pack(bo + "IIII", nchans, nsamples, dtype, n) + data


def event(tt: int, tval: bytes, vt: int, vval: bytes, sample: int, offset: int = 0, duration: int = 0, bo: str = "<", slack: bytes = b"", numel: Optional[Tuple[int, int]] = None, bufsize: Optional[int] = None) -> bytes:
    """An eventdef (32 bytes) + type bytes + value bytes (+ slack)."""
    tn = len(tval) // struct.calcsize(WORD[tt]) if numel is None else numel[0]
    vn = len(vval) // struct.calcsize(WORD[vt]) if numel is None else numel[1]
    size = len(tval) + len(vval) + len(slack) if bufsize is None else bufsize
    return struct.pack(bo + "IIIIiiiI", tt, tn, vt, vn, sample, offset, duration, size) + tval + vval + slack


def sel(begin: int, end: int, bo: str = "<") -> bytes:
    return struct.pack(bo + "II", begin, end)


def waitdef(ns: int, ne: int, ms: int, bo: str = "<") -> bytes:
    return struct.pack(bo + "III", ns, ne, ms)


def reply(command: int, payload: bytes = b"", bo: str = "<") -> bytes:
    """The exact bytes of a reply."""
    return prefix(command, len(payload), bo) + payload


ERR = {c: reply(c) for c in (PUT_ERR, GET_ERR, FLUSH_ERR, WAIT_ERR)}
OK = {c: reply(c) for c in (PUT_OK, FLUSH_OK)}


# -- a raw connection ---------------------------------------------------------------------------
class Conn:
    """A socket to the server with exact reads and close detection."""

    def __init__(self, srv: FieldTripServer, unix: bool = False, timeout: float = 15.0) -> None:
        if unix:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(srv.unix)
        else:
            self.sock = socket.create_connection((srv.host, srv.port), timeout=timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def __enter__(self) -> "Conn":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            got = self.sock.recv(n - len(buf))
            if not got:
                raise AssertionError(f"the server closed the connection after {len(buf)} of {n} bytes: {bytes(buf).hex(' ')}")
            buf += got
        return bytes(buf)

    def reply(self, bo: str = "<") -> bytes:
        """One whole reply, prefix included, as bytes."""
        head = self.recv_exact(8)
        _, _, size = struct.unpack(bo + "HHI", head)
        return head + self.recv_exact(size)

    def ask(self, data: bytes, bo: str = "<") -> bytes:
        self.send(data)
        return self.reply(bo)

    def expect_closed(self, within: float = 10.0) -> None:
        """The server closes this connection without sending anything (more)."""
        self.sock.settimeout(within)
        try:
            got = self.sock.recv(4096)
        except ConnectionResetError:
            return
        except socket.timeout:
            raise AssertionError(f"the server did not close the connection within {within} s") from None
        assert got == b"", f"expected the connection closed with no reply, got {got.hex(' ')}"

    def expect_silence(self, during: float = 0.3) -> None:
        """Nothing arrives for `during` seconds (and the connection stays open)."""
        self.sock.settimeout(during)
        try:
            got = self.sock.recv(4096)
        except socket.timeout:
            return
        finally:
            self.sock.settimeout(15.0)
        raise AssertionError(f"expected no reply, got {got.hex(' ') if got else 'the connection closed'}")


# -- fixtures -------------------------------------------------------------------------------------
@pytest.fixture
def start(tmp_path: Path, make_name: Callable[[], str]) -> Iterator[Callable[..., FieldTripServer]]:
    """Start `rtloop serve` processes (each in its own directory for its UNIX socket)."""
    servers: List[FieldTripServer] = []

    def run(*args: str) -> FieldTripServer:
        d = tmp_path / f"srv{len(servers)}"
        d.mkdir()
        s = FieldTripServer(d, make_name(), *args)
        servers.append(s)
        return s

    yield run
    for s in servers:
        s.stop()


@pytest.fixture
def srv(start: Callable[..., FieldTripServer]) -> FieldTripServer:
    return start(*SERVER_ARGS)


# -- stored state and its check -------------------------------------------------------------------
LABELS = chunk(1, b"Fz\0Cz\0Pz\0")
OPAQUE = chunk(42, bytes(range(256)) + b"\0\0\xff")
CHUNKS = LABELS + OPAQUE
DATA = [float(i) + 0.25 for i in range(3 * 10)]  # 10 samples x 3 channels, float32
EVENTS = (
    event(CHAR, b"trigger", CHAR, b"go", 3, 1, 2)
    + event(CHAR, b"level", FLOAT64, samples(FLOAT64, [1.5, -2.0]), 4)
    + event(INT32, samples(INT32, [7]), UINT8, bytes([1, 2, 3]), 9, -1, 0)
)


@dataclass
class Stored:
    get_hdr: bytes
    get_dat: bytes
    get_evt: bytes


def seed(srv: FieldTripServer) -> Stored:
    """PUT a header (3 ch float32 at 250 Hz, labels and an opaque chunk), 10 samples, 3 events."""
    with Conn(srv) as c:
        assert c.ask(msg(PUT_HDR, headerdef(3, 250.0, FLOAT32, CHUNKS))) == OK[PUT_OK]
        assert c.ask(msg(PUT_DAT, datadef(3, 10, FLOAT32, samples(FLOAT32, DATA)))) == OK[PUT_OK]
        assert c.ask(msg(PUT_EVT, EVENTS)) == OK[PUT_OK]
    return Stored(
        reply(GET_OK, headerdef(3, 250.0, FLOAT32, CHUNKS, ns=10, ne=3)),
        reply(GET_OK, datadef(3, 10, FLOAT32, samples(FLOAT32, DATA))),
        reply(GET_OK, EVENTS),
    )


def assert_intact(srv: FieldTripServer, stored: Stored) -> None:
    """Over a fresh connection: header, samples and events exactly as stored."""
    with Conn(srv) as c:
        assert c.ask(msg(GET_HDR)) == stored.get_hdr
        assert c.ask(msg(GET_DAT)) == stored.get_dat
        assert c.ask(msg(GET_EVT)) == stored.get_evt


# -- golden replies -------------------------------------------------------------------------------
@pytest.mark.parametrize("unix", [False, True], ids=["tcp", "unix"])
def test_golden_replies(srv: FieldTripServer, unix: bool) -> None:
    with Conn(srv, unix) as c:
        # before any header: every request family's error, bufsize 0
        assert c.ask(msg(GET_HDR)) == bytes.fromhex("01 00 05 02 00 00 00 00")
        assert c.ask(msg(GET_DAT)) == ERR[GET_ERR]
        assert c.ask(msg(GET_DAT, sel(0, 0))) == ERR[GET_ERR]
        assert c.ask(msg(GET_EVT)) == ERR[GET_ERR]
        assert c.ask(msg(PUT_DAT, datadef(1, 1, FLOAT32, samples(FLOAT32, [1.0])))) == ERR[PUT_ERR]
        assert c.ask(msg(PUT_EVT, event(CHAR, b"a", CHAR, b"b", 0))) == ERR[PUT_ERR]
        assert c.ask(msg(FLUSH_HDR)) == bytes.fromhex("01 00 05 03 00 00 00 00")
        assert c.ask(msg(FLUSH_DAT)) == ERR[FLUSH_ERR]
        assert c.ask(msg(FLUSH_EVT)) == ERR[FLUSH_ERR]
        assert c.ask(msg(WAIT_DAT, waitdef(0, 0, 0))) == bytes.fromhex("01 00 05 04 00 00 00 00")

        assert c.ask(msg(PUT_HDR, headerdef(3, 250.0, FLOAT32, CHUNKS))) == bytes.fromhex("01 00 04 01 00 00 00 00")
        hdr = c.ask(msg(GET_HDR))
        assert hdr[:8] == bytes.fromhex("01 00 04 02") + struct.pack("<I", 24 + len(CHUNKS))
        assert hdr[8:] == struct.pack("<IIIfII", 3, 0, 0, 250.0, FLOAT32, len(CHUNKS)) + CHUNKS  # chunks byte-exact
        assert c.ask(msg(WAIT_DAT, waitdef(0, 0, 0))) == bytes.fromhex("01 00 04 04 08 00 00 00 00 00 00 00 00 00 00 00")
        assert c.ask(msg(GET_DAT)) == ERR[GET_ERR]  # no samples yet

        block = samples(FLOAT32, DATA[:12])  # 4 samples
        assert c.ask(msg(PUT_DAT, datadef(3, 4, FLOAT32, block))) == OK[PUT_OK]
        got = c.ask(msg(GET_DAT, sel(1, 2)))
        assert got == bytes.fromhex("01 00 04 02 28 00 00 00") + struct.pack("<IIII", 3, 2, FLOAT32, 24) + block[12:36]
        assert c.ask(msg(GET_DAT)) == reply(GET_OK, datadef(3, 4, FLOAT32, block))
        assert c.ask(msg(GET_DAT, sel(0, ALL))) == reply(GET_OK, datadef(3, 4, FLOAT32, block))  # to the newest
        assert c.ask(msg(GET_DAT, sel(2, ALL))) == reply(GET_OK, datadef(3, 2, FLOAT32, block[24:]))
        assert c.ask(msg(GET_DAT, sel(3, 3))) == reply(GET_OK, datadef(3, 1, FLOAT32, block[36:]))
        # begin = end + 1: GET_OK with zero samples
        assert c.ask(msg(GET_DAT, sel(2, 1))) == bytes.fromhex("01 00 04 02 10 00 00 00 03 00 00 00 00 00 00 00 09 00 00 00 00 00 00 00")
        assert c.ask(msg(WAIT_DAT, waitdef(0, 0, 0))) == reply(WAIT_OK, struct.pack("<II", 4, 0))

        assert c.ask(msg(PUT_EVT, EVENTS)) == OK[PUT_OK]
        assert c.ask(msg(GET_EVT)) == reply(GET_OK, EVENTS)  # every event, byte for byte
        assert c.ask(msg(GET_EVT, sel(1, 1))) == reply(GET_OK, event(CHAR, b"level", FLOAT64, samples(FLOAT64, [1.5, -2.0]), 4))
        assert c.ask(msg(GET_EVT, sel(1, 0))) == bytes.fromhex("01 00 04 02 00 00 00 00")
        assert c.ask(msg(GET_EVT, sel(3, 3))) == ERR[GET_ERR]
        assert c.ask(msg(WAIT_DAT, waitdef(0, 0, 0))) == reply(WAIT_OK, struct.pack("<II", 4, 3))
        assert c.ask(msg(GET_HDR)) == reply(GET_OK, headerdef(3, 250.0, FLOAT32, CHUNKS, ns=4, ne=3))

        assert c.ask(msg(FLUSH_EVT)) == bytes.fromhex("01 00 04 03 00 00 00 00")
        assert c.ask(msg(WAIT_DAT, waitdef(0, 0, 0))) == reply(WAIT_OK, struct.pack("<II", 4, 0))
        assert c.ask(msg(GET_EVT)) == ERR[GET_ERR]
        assert c.ask(msg(FLUSH_DAT)) == OK[FLUSH_OK]
        assert c.ask(msg(GET_HDR)) == reply(GET_OK, headerdef(3, 250.0, FLOAT32, CHUNKS))  # header kept
        assert c.ask(msg(GET_DAT, sel(0, 0))) == ERR[GET_ERR]
        assert c.ask(msg(PUT_DAT, datadef(3, 1, FLOAT32, block[36:]))) == OK[PUT_OK]
        assert c.ask(msg(GET_DAT, sel(0, 0))) == reply(GET_OK, datadef(3, 1, FLOAT32, block[36:]))  # indices restart
        assert c.ask(msg(FLUSH_HDR)) == OK[FLUSH_OK]
        assert c.ask(msg(GET_HDR)) == ERR[GET_ERR]
        assert c.ask(msg(WAIT_DAT, waitdef(0, 0, 0))) == ERR[WAIT_ERR]


def test_put_hdr_resets_counts_and_ignores_theirs(srv: FieldTripServer) -> None:
    seed(srv)
    with Conn(srv) as c:
        # nsamples/nevents in a PUT_HDR are ignored; the same shape again still resets
        assert c.ask(msg(PUT_HDR, headerdef(3, 250.0, FLOAT32, CHUNKS, ns=77, ne=5))) == OK[PUT_OK]
        assert c.ask(msg(GET_HDR)) == reply(GET_OK, headerdef(3, 250.0, FLOAT32, CHUNKS))
        assert c.ask(msg(GET_DAT, sel(0, 0))) == ERR[GET_ERR]
        assert c.ask(msg(GET_EVT)) == ERR[GET_ERR]
        # another shape, no chunks
        assert c.ask(msg(PUT_HDR, headerdef(2, 1000.0, INT16))) == OK[PUT_OK]
        assert c.ask(msg(GET_HDR)) == reply(GET_OK, headerdef(2, 1000.0, INT16))
        x = samples(INT16, [1, -1, 2, -2, 32767, -32768])
        assert c.ask(msg(PUT_DAT, datadef(2, 3, INT16, x))) == OK[PUT_OK]
        assert c.ask(msg(GET_DAT)) == reply(GET_OK, datadef(2, 3, INT16, x))


def test_pipelined_requests_in_one_write(srv: FieldTripServer) -> None:
    x = samples(INT32, list(range(8)))
    requests = [
        msg(PUT_HDR, headerdef(2, 100.0, INT32)),
        msg(PUT_DAT, datadef(2, 4, INT32, x)),
        msg(GET_HDR),
        msg(GET_DAT, sel(1, 2)),
        msg(GET_DAT, sel(5, 3)),  # refused (the reference crashes here)
        msg(PUT_EVT, event(CHAR, b"t", CHAR, b"v", 2)),
        msg(WAIT_DAT, waitdef(0, 0, 0)),
        msg(GET_DAT, sel(9, 9)),
        msg(GET_EVT),
        msg(FLUSH_DAT),
        msg(WAIT_DAT, waitdef(0, 0, 0)),
    ]
    expected = [
        OK[PUT_OK],
        OK[PUT_OK],
        reply(GET_OK, headerdef(2, 100.0, INT32, ns=4)),
        reply(GET_OK, datadef(2, 2, INT32, x[8:24])),
        ERR[GET_ERR],
        OK[PUT_OK],
        reply(WAIT_OK, struct.pack("<II", 4, 1)),
        ERR[GET_ERR],
        reply(GET_OK, event(CHAR, b"t", CHAR, b"v", 2)),
        OK[FLUSH_OK],
        reply(WAIT_OK, struct.pack("<II", 0, 1)),
    ]
    with Conn(srv) as c:
        c.send(b"".join(requests) * 3)  # three rounds in one write
        for _ in range(3):
            for want in expected:
                assert c.reply() == want
        c.expect_silence(0.2)


def test_noresponse_requests_send_nothing(srv: FieldTripServer) -> None:
    x = samples(UINT16, [1, 2, 3, 4])
    with Conn(srv) as c:
        c.send(msg(PUT_HDR_NR, headerdef(2, 10.0, UINT16)))
        c.send(msg(PUT_DAT_NR, datadef(2, 2, UINT16, x)))
        c.send(msg(PUT_DAT_NR, datadef(3, 1, UINT16, samples(UINT16, [9, 9, 9]))))  # wrong channels: still silent
        c.send(msg(PUT_DAT_NR, datadef(2, 2, UINT16, x, bufsize=4)))  # too short: silent
        c.send(msg(PUT_EVT_NR, event(CHAR, b"k", INT16, samples(INT16, [-5]), 1)))
        c.send(msg(PUT_EVT_NR, event(99, b"k", CHAR, b"v", 1, numel=(1, 1))))  # bad type: silent
        c.expect_silence(0.3)
        # the next bytes are exactly the reply to this request
        assert c.ask(msg(WAIT_DAT, waitdef(0, 0, 0))) == reply(WAIT_OK, struct.pack("<II", 2, 1))
        assert c.ask(msg(GET_DAT)) == reply(GET_OK, datadef(2, 2, UINT16, x))
        assert c.ask(msg(GET_EVT)) == reply(GET_OK, event(CHAR, b"k", INT16, samples(INT16, [-5]), 1))
        c.expect_silence(0.1)


def test_request_then_close_without_reading(srv: FieldTripServer) -> None:
    stored = seed(srv)
    for _ in range(20):  # one request per connection, the reply never read
        with Conn(srv) as c:
            c.send(msg(GET_DAT))
    with Conn(srv) as c:
        c.send(msg(PUT_DAT, datadef(3, 1, FLOAT32, samples(FLOAT32, [1.0, 2.0, 3.0]))))
    with Conn(srv) as c:  # the PUT was whole, so it counts
        assert c.ask(msg(WAIT_DAT, waitdef(10, ALL, 5000))) == reply(WAIT_OK, struct.pack("<II", 11, 3))
        assert c.ask(msg(GET_DAT, sel(0, 9))) == stored.get_dat
        assert c.ask(msg(GET_DAT, sel(10, 10))) == reply(GET_OK, datadef(3, 1, FLOAT32, samples(FLOAT32, [1.0, 2.0, 3.0])))


# -- byte order and version ------------------------------------------------------------------------
def test_big_endian_client_gets_big_endian_replies(srv: FieldTripServer) -> None:
    res = [1.0e-6, 0.5, -3.25]
    be_chunks = chunk(1, b"a\0b\0c\0", ">") + chunk(3, struct.pack(">3d", *res), ">") + chunk(42, b"\x01\x02\x03", ">")
    le_chunks = chunk(1, b"a\0b\0c\0") + chunk(3, struct.pack("<3d", *res)) + chunk(42, b"\x01\x02\x03")
    x = [1, -2, 300, -32768, 32767, 0]
    with Conn(srv) as be, Conn(srv) as le:
        assert be.ask(msg(PUT_HDR, headerdef(3, 512.0, INT16, be_chunks, ">"), ">"), ">") == bytes.fromhex("00 01 01 04 00 00 00 00")
        # the resolutions chunk is converted (float64 values); the others are opaque bytes
        assert le.ask(msg(GET_HDR)) == reply(GET_OK, headerdef(3, 512.0, INT16, le_chunks))
        assert be.ask(msg(GET_HDR, b"", ">"), ">") == reply(GET_OK, headerdef(3, 512.0, INT16, be_chunks, ">"), ">")

        assert be.ask(msg(PUT_DAT, datadef(3, 2, INT16, samples(INT16, x, ">"), ">"), ">"), ">") == bytes.fromhex("00 01 01 04 00 00 00 00")
        assert le.ask(msg(GET_DAT)) == reply(GET_OK, datadef(3, 2, INT16, samples(INT16, x)))
        assert be.ask(msg(GET_DAT, sel(0, 1, ">"), ">"), ">") == reply(GET_OK, datadef(3, 2, INT16, samples(INT16, x, ">"), ">"), ">")
        assert be.ask(msg(GET_DAT, sel(1, 1, ">"), ">"), ">") == reply(GET_OK, datadef(3, 1, INT16, samples(INT16, x[3:], ">"), ">"), ">")
        # a little-endian writer, a big-endian reader
        assert le.ask(msg(PUT_DAT, datadef(3, 1, INT16, samples(INT16, [7, 8, 9])))) == OK[PUT_OK]
        assert be.ask(msg(GET_DAT, sel(2, 2, ">"), ">"), ">") == reply(GET_OK, datadef(3, 1, INT16, samples(INT16, [7, 8, 9], ">"), ">"), ">")
        assert be.ask(msg(WAIT_DAT, waitdef(0, 0, 0, ">"), ">"), ">") == bytes.fromhex("00 01 04 04 00 00 00 08 00 00 00 03 00 00 00 00")

        ev_be = event(CHAR, b"level", FLOAT64, samples(FLOAT64, [1.5, -2.0], ">"), 2, -1, 4, ">") + event(
            INT32, samples(INT32, [70000], ">"), CHAR, b"x", 1, bo=">"
        )
        ev_le = event(CHAR, b"level", FLOAT64, samples(FLOAT64, [1.5, -2.0]), 2, -1, 4) + event(INT32, samples(INT32, [70000]), CHAR, b"x", 1)
        assert be.ask(msg(PUT_EVT, ev_be, ">"), ">") == bytes.fromhex("00 01 01 04 00 00 00 00")
        assert le.ask(msg(GET_EVT)) == reply(GET_OK, ev_le)
        assert be.ask(msg(GET_EVT, b"", ">"), ">") == reply(GET_OK, ev_be, ">")
        # errors in big-endian too
        assert be.ask(msg(GET_DAT, sel(5, 3, ">"), ">"), ">") == bytes.fromhex("00 01 02 05 00 00 00 00")
        assert be.ask(msg(PUT_DAT, datadef(2, 1, INT16, samples(INT16, [1, 2], ">"), ">"), ">"), ">") == bytes.fromhex("00 01 01 05 00 00 00 00")
        assert be.ask(msg(FLUSH_EVT, b"", ">"), ">") == bytes.fromhex("00 01 03 04 00 00 00 00")
        assert le.ask(msg(WAIT_DAT, waitdef(0, 0, 0))) == reply(WAIT_OK, struct.pack("<II", 3, 0))


@pytest.mark.parametrize("version", [2, 0, 0x0200, 0xFFFF], ids=["2", "0", "2-big-endian", "ffff"])
def test_other_versions_close_the_connection(srv: FieldTripServer, version: int) -> None:
    stored = seed(srv)
    with Conn(srv) as bystander, Conn(srv) as c:
        assert bystander.ask(msg(WAIT_DAT, waitdef(0, 0, 0))) == reply(WAIT_OK, struct.pack("<II", 10, 3))
        c.send(prefix(GET_HDR, 0, version=version))
        c.expect_closed()
        # the other client keeps working, on its open connection and on new ones
        assert bystander.ask(msg(GET_HDR)) == stored.get_hdr
    assert_intact(srv, stored)


# -- bad input --------------------------------------------------------------------------------------
def test_truncated_messages_then_close(srv: FieldTripServer) -> None:
    stored = seed(srv)
    full = msg(PUT_DAT, datadef(3, 2, FLOAT32, samples(FLOAT32, [9.0] * 6)))
    for cut in (1, 3, 7, 8, 12, len(full) - 1):
        with Conn(srv) as c:
            c.send(full[:cut])
        assert_intact(srv, stored)  # nothing of the partial PUT_DAT was stored
    for cut in (8, 20):  # a PUT_HDR or PUT_EVT cut short changes nothing either
        with Conn(srv) as c:
            c.send(msg(PUT_HDR, headerdef(1, 1.0, UINT8))[:cut])
        with Conn(srv) as c:
            c.send(msg(PUT_EVT, event(CHAR, b"abc", CHAR, b"def", 0))[:cut + 12])
        assert_intact(srv, stored)
    # a half-sent message, then the write side shut: the server closes without a reply
    with Conn(srv) as c:
        c.send(full[:20])
        c.sock.shutdown(socket.SHUT_WR)
        c.expect_closed()
    assert_intact(srv, stored)


@pytest.mark.parametrize(
    "command, error",
    [(PUT_HDR, PUT_ERR), (PUT_DAT, PUT_ERR), (PUT_EVT, PUT_ERR), (GET_DAT, GET_ERR), (GET_EVT, GET_ERR),
     (GET_HDR, GET_ERR), (FLUSH_DAT, FLUSH_ERR), (WAIT_DAT, WAIT_ERR)],  # fmt: skip
)
def test_a_message_beyond_the_limit_is_refused_and_closed(srv: FieldTripServer, command: int, error: int) -> None:
    stored = seed(srv)
    for size in (MAX_MESSAGE + 1024, 1 << 30, ALL):
        with Conn(srv) as c:
            c.send(prefix(command, size))  # only the prefix: nothing is sent the server would not read
            assert c.reply() == ERR[error]
            c.expect_closed()
        assert_intact(srv, stored)
    # a message just under the limit is fine
    with Conn(srv) as c:
        n = (MAX_MESSAGE - 8 - 16 - 100) // 12
        big = samples(FLOAT32, [0.5] * (3 * n))
        assert c.ask(msg(PUT_DAT, datadef(3, n, FLOAT32, big))) == OK[PUT_OK]
        assert c.ask(msg(GET_DAT, sel(10, 10 + n - 1))) == reply(GET_OK, datadef(3, n, FLOAT32, big))
        assert c.ask(msg(GET_DAT, sel(0, 9))) == stored.get_dat


@pytest.mark.parametrize("command", [PUT_HDR_NR, PUT_DAT_NR, PUT_EVT_NR])
def test_a_noresponse_message_beyond_the_limit_is_closed_without_a_reply(srv: FieldTripServer, command: int) -> None:
    stored = seed(srv)
    with Conn(srv) as c:
        c.send(prefix(command, MAX_MESSAGE + 1024))
        c.expect_closed()  # *_NORESPONSE: nothing is ever sent back
    assert_intact(srv, stored)


def test_unknown_commands(srv: FieldTripServer) -> None:
    stored = seed(srv)
    with Conn(srv) as c:  # outside every family: closed, no reply
        c.send(msg(0x0601))
        c.expect_closed()
    with Conn(srv) as c:
        c.send(msg(0x0999))
        c.expect_closed()
    with Conn(srv) as c:  # family 1 (PUT), unknown member: PUT_ERR
        assert c.ask(msg(0x0109)) == bytes.fromhex("01 00 05 01 00 00 00 00")
    # the WAIT family's missing 0x0401, a reply code sent as a request: the family's error or a
    # clean close (notes §5), never stray bytes
    for command, error in ((0x0401, WAIT_ERR), (PUT_OK, PUT_ERR), (GET_ERR, GET_ERR), (FLUSH_OK, FLUSH_ERR)):
        with Conn(srv) as c:
            c.send(msg(command))
            head = c.sock.recv(8)
            assert head in (b"", ERR[error]), f"0x{command:04x}: got {head.hex(' ')}"
    assert_intact(srv, stored)


def test_put_dat_refusals(srv: FieldTripServer) -> None:
    stored = seed(srv)
    one = samples(FLOAT32, [1.0, 2.0, 3.0])
    bad = {
        "two channels, the header three": msg(PUT_DAT, datadef(2, 1, FLOAT32, samples(FLOAT32, [1.0, 2.0]))),
        "another data type": msg(PUT_DAT, datadef(3, 1, INT32, samples(INT32, [1, 2, 3]))),
        "an unknown data type": msg(PUT_DAT, datadef(3, 1, 11, one)),
        "datadef.bufsize below nchans x nsamples x wordsize": msg(PUT_DAT, datadef(3, 2, FLOAT32, one)),
        "datadef.bufsize says 24 but 12 bytes follow": msg(PUT_DAT, datadef(3, 2, FLOAT32, one, bufsize=24)),
        "datadef.bufsize beyond the message": msg(PUT_DAT, datadef(3, 1, FLOAT32, one, bufsize=1 << 20)),
        "a payload shorter than a datadef": msg(PUT_DAT, struct.pack("<II", 3, 1)),
        "no payload at all": msg(PUT_DAT),
        "nchans x nsamples overflowing 32 bits": msg(PUT_DAT, datadef(0x10000, 0x10000, FLOAT32, one)),
    }
    with Conn(srv) as c:
        for why, m in bad.items():
            assert c.ask(m) == ERR[PUT_ERR], why
            assert c.ask(msg(WAIT_DAT, waitdef(0, 0, 0))) == reply(WAIT_OK, struct.pack("<II", 10, 3)), why
            assert_intact(srv, stored)
        # zero samples: PUT_OK, nothing added; trailing bytes after the data are ignored
        assert c.ask(msg(PUT_DAT, datadef(3, 0, FLOAT32, b""))) == OK[PUT_OK]
        assert_intact(srv, stored)
        assert c.ask(msg(PUT_DAT, datadef(3, 1, FLOAT32, one + b"\xee" * 5))) == OK[PUT_OK]
        assert c.ask(msg(GET_DAT, sel(10, 10))) == reply(GET_OK, datadef(3, 1, FLOAT32, one))


def test_put_hdr_refusals_keep_the_old_header(srv: FieldTripServer) -> None:
    stored = seed(srv)
    bad = {
        "an unknown data type": msg(PUT_HDR, headerdef(2, 10.0, 11)),
        "data type 0xFFFFFFFF (unknown)": msg(PUT_HDR, headerdef(2, 10.0, ALL)),
        "char samples": msg(PUT_HDR, headerdef(2, 10.0, CHAR)),
        "chunk bytes missing": msg(PUT_HDR, headerdef(2, 10.0, FLOAT32, chunk(1, b"a\0b\0"))[:-3]),
        "headerdef.bufsize beyond the message": msg(PUT_HDR, struct.pack("<IIIfII", 2, 0, 0, 10.0, FLOAT32, 1 << 20)),
        "a payload shorter than a headerdef": msg(PUT_HDR, struct.pack("<III", 2, 0, 0)),
    }
    with Conn(srv) as c:
        for why, m in bad.items():
            assert c.ask(m) == ERR[PUT_ERR], why
            assert_intact(srv, stored)


def test_put_evt_refusals_store_nothing(srv: FieldTripServer) -> None:
    stored = seed(srv)
    good = event(CHAR, b"ok", CHAR, b"fine", 5)
    bad = {
        "event bufsize runs past the payload": event(CHAR, b"ab", CHAR, b"cd", 0, bufsize=100),
        "type + value longer than the event's bufsize": event(CHAR, b"abc", CHAR, b"def", 0, bufsize=4),
        "numel x wordsize beyond bufsize": event(CHAR, b"ab", FLOAT64, samples(FLOAT64, [1.0]), 0, numel=(2, 3)),
        "unknown type_type": event(11, b"ab", CHAR, b"cd", 0, numel=(2, 2)),
        "unknown value_type": event(CHAR, b"ab", 0x1234, b"cd", 0, numel=(2, 2)),
        "a payload shorter than an eventdef": b"\0" * 20,
        "a good event, then a bad one": good + event(CHAR, b"ab", CHAR, b"cd", 0, bufsize=100),
        "a good event, then a torn eventdef": good + good[:20],
    }
    with Conn(srv) as c:
        for why, payload in bad.items():
            assert c.ask(msg(PUT_EVT, payload)) == ERR[PUT_ERR], why
            assert c.ask(msg(WAIT_DAT, waitdef(0, 0, 0))) == reply(WAIT_OK, struct.pack("<II", 10, 3)), why
            assert_intact(srv, stored)
        assert c.ask(msg(PUT_EVT)) in (ERR[PUT_ERR], OK[PUT_OK])  # no events at all: either, but nothing stored
        assert_intact(srv, stored)
        # slack after type and value is allowed
        assert c.ask(msg(PUT_EVT, event(CHAR, b"s", UINT8, b"\x05", 6, slack=b"\0" * 6))) == OK[PUT_OK]
        got = c.ask(msg(GET_EVT, sel(3, 3)))
        tt, tn, vt, vn, sample, offset, duration, size = struct.unpack_from("<IIIIiiiI", got, 8)
        assert (tt, tn, vt, vn, sample, offset, duration) == (CHAR, 1, UINT8, 1, 6, 0, 0) and size >= 2
        assert got[40:42] == b"s\x05"


def test_get_refusals(srv: FieldTripServer) -> None:
    stored = seed(srv)
    bad = {
        "begin > end + 1 (the reference server segfaults)": msg(GET_DAT, sel(5, 3)),
        "begin > end + 1, far": msg(GET_DAT, sel(ALL, 0)),
        "end past the newest": msg(GET_DAT, sel(0, 10)),
        "begin past the newest": msg(GET_DAT, sel(10, 12)),
        "a selection of 4 bytes": msg(GET_DAT, struct.pack("<I", 0)),
        "events: begin > end + 1": msg(GET_EVT, sel(2, 0)),
        "events: end past the newest": msg(GET_EVT, sel(0, 3)),
        "events: end = 0xFFFFFFFF": msg(GET_EVT, sel(0, ALL)),
        "events: a selection of 4 bytes": msg(GET_EVT, struct.pack("<I", 0)),
    }
    with Conn(srv) as c, Conn(srv, unix=True) as other:
        for why, m in bad.items():
            assert c.ask(m) == ERR[GET_ERR], why
            assert other.ask(msg(GET_DAT, sel(9, 9))) == reply(GET_OK, datadef(3, 1, FLOAT32, samples(FLOAT32, DATA[27:]))), why
            assert_intact(srv, stored)
        for why, m in {
            "WAIT_DAT with bufsize 0 (as the web page shows it)": msg(WAIT_DAT),
            "WAIT_DAT with 8 bytes": msg(WAIT_DAT, waitdef(0, 0, 0)[:8]),
            "WAIT_DAT with 16 bytes": msg(WAIT_DAT, waitdef(0, 0, 0) + b"\0" * 4),
        }.items():
            assert c.ask(m) == ERR[WAIT_ERR], why
        assert c.ask(msg(GET_HDR)) == stored.get_hdr  # the same connection still works
    assert_intact(srv, stored)


def test_empty_selections_outside_the_buffer_are_refused(srv: FieldTripServer) -> None:
    """begin = end + 1 is GET_OK with nothing only inside the buffer. The GET_ERR checks come
    first (notes §1.6 and the reference dmarequest.c): begin or end >= nsamples (nevents), or
    begin already overwritten."""
    stored = seed(srv)  # 10 samples, 3 events
    with Conn(srv) as c:
        assert c.ask(msg(GET_DAT, sel(5, 4))) == reply(GET_OK, datadef(3, 0, FLOAT32, b""))
        assert c.ask(msg(GET_DAT, sel(9, 8))) == reply(GET_OK, datadef(3, 0, FLOAT32, b""))
        assert c.ask(msg(GET_EVT, sel(2, 1))) == reply(GET_OK)
        assert c.ask(msg(GET_DAT, sel(10, 9))) == ERR[GET_ERR]  # begin = nsamples
        assert c.ask(msg(GET_DAT, sel(11, 10))) == ERR[GET_ERR]  # end = nsamples
        assert c.ask(msg(GET_DAT, sel(30, 29))) == ERR[GET_ERR]
        assert c.ask(msg(GET_EVT, sel(3, 2))) == ERR[GET_ERR]  # begin = nevents
        assert c.ask(msg(GET_EVT, sel(4, 3))) == ERR[GET_ERR]
    assert_intact(srv, stored)
    with Conn(srv) as c:  # overwritten: begin < nsamples - capacity
        assert c.ask(msg(PUT_HDR, headerdef(1, 1000.0, INT32))) == OK[PUT_OK]
        for b in range(0, 40_000, 10_000):
            assert c.ask(msg(PUT_DAT, datadef(1, 10_000, INT32, samples(INT32, list(range(b, b + 10_000)))))) == OK[PUT_OK]
        first = 40_000 - struct.unpack_from("<IIII", c.ask(msg(GET_DAT)), 8)[1]
        assert first > 1
        assert c.ask(msg(GET_DAT, sel(first, first - 1))) == reply(GET_OK, datadef(1, 0, INT32, b""))
        assert c.ask(msg(GET_DAT, sel(first - 1, first - 2))) == ERR[GET_ERR]
        assert c.ask(msg(GET_DAT, sel(1, 0))) == ERR[GET_ERR]


def test_only_the_newest_samples_and_events_are_kept(start: Callable[..., FieldTripServer]) -> None:
    s = start(*SERVER_ARGS)  # --capacity 10000 (or more), --events 16
    block = 10_000  # 40 KB of int32 per PUT_DAT, under --max-message
    total = 4 * block
    with Conn(s) as c:
        assert c.ask(msg(PUT_HDR, headerdef(1, 1000.0, INT32))) == OK[PUT_OK]
        for b in range(0, total, block):
            assert c.ask(msg(PUT_DAT, datadef(1, block, INT32, samples(INT32, list(range(b, b + block)))))) == OK[PUT_OK]
        got = c.ask(msg(GET_DAT))  # the whole window kept: min(nsamples, capacity) samples
        nch, kept, dtype, size = struct.unpack_from("<IIII", got, 8)
        assert (nch, dtype) == (1, INT32) and 10_000 <= kept < total
        assert got == reply(GET_OK, datadef(1, kept, INT32, samples(INT32, list(range(total - kept, total)))))
        first = total - kept
        assert c.ask(msg(GET_DAT, sel(first - 1, first - 1))) == ERR[GET_ERR]  # overwritten
        assert c.ask(msg(GET_DAT, sel(0, 0))) == ERR[GET_ERR]
        assert c.ask(msg(GET_DAT, sel(first, first + 2))) == reply(GET_OK, datadef(1, 3, INT32, samples(INT32, [first, first + 1, first + 2])))
        # one PUT_DAT may carry at most what the buffer keeps
        if (kept + 1) * 4 + 24 <= MAX_MESSAGE:
            assert c.ask(msg(PUT_DAT, datadef(1, kept + 1, INT32, samples(INT32, [0] * (kept + 1))))) == ERR[PUT_ERR]
            assert c.ask(msg(PUT_DAT, datadef(1, kept, INT32, samples(INT32, [5] * kept)))) == OK[PUT_OK]
            assert c.ask(msg(WAIT_DAT, waitdef(0, 0, 0))) == reply(WAIT_OK, struct.pack("<II", total + kept, 0))

        evs = [event(CHAR, b"e", INT32, samples(INT32, [i]), i) for i in range(20)]
        for e in evs:
            assert c.ask(msg(PUT_EVT, e)) == OK[PUT_OK]
        assert c.ask(msg(GET_EVT)) == reply(GET_OK, b"".join(evs[4:]))  # the newest 16
        assert c.ask(msg(GET_EVT, sel(3, 3))) == ERR[GET_ERR]
        assert c.ask(msg(GET_EVT, sel(4, 5))) == reply(GET_OK, evs[4] + evs[5])


def test_event_sample_minus_one_is_filled_in(srv: FieldTripServer) -> None:
    with Conn(srv) as c:
        assert c.ask(msg(PUT_HDR, headerdef(1, 1.0, UINT8))) == OK[PUT_OK]  # 1 Hz
        t_dat = time.monotonic()
        assert c.ask(msg(PUT_DAT, datadef(1, 20, UINT8, bytes(range(20))))) == OK[PUT_OK]
        assert c.ask(msg(PUT_EVT, event(CHAR, b"auto", CHAR, b"x", -1))) == OK[PUT_OK]
        got = c.ask(msg(GET_EVT))
        sample = struct.unpack_from("<i", got, 8 + 16)[0]
        # nsamples + (int)(fsample x seconds since the last PUT_DAT): 20 within a second at 1 Hz
        assert 20 <= sample <= 20 + int(1.0 * (time.monotonic() - t_dat))
        assert got == reply(GET_OK, event(CHAR, b"auto", CHAR, b"x", sample))
        # at 1 kHz it moves with the time since the last PUT_DAT
        assert c.ask(msg(PUT_HDR, headerdef(1, 1000.0, UINT8))) == OK[PUT_OK]
        t_dat = time.monotonic()
        assert c.ask(msg(PUT_DAT, datadef(1, 20, UINT8, bytes(20)))) == OK[PUT_OK]
        time.sleep(0.2)
        assert c.ask(msg(PUT_EVT, event(CHAR, b"auto", CHAR, b"x", -1))) == OK[PUT_OK]
        dt = time.monotonic() - t_dat
        sample = struct.unpack_from("<i", c.ask(msg(GET_EVT)), 8 + 16)[0]
        assert 20 + 199 <= sample <= 20 + int(1000 * dt) + 1


@pytest.mark.parametrize("unix", [False, True], ids=["tcp", "unix"])
def test_wait_dat(srv: FieldTripServer, unix: bool) -> None:
    with Conn(srv, unix) as c, Conn(srv, not unix) as w:
        assert c.ask(msg(PUT_HDR, headerdef(1, 100.0, FLOAT64))) == OK[PUT_OK]
        assert c.ask(msg(PUT_DAT, datadef(1, 5, FLOAT64, samples(FLOAT64, [0.0] * 5)))) == OK[PUT_OK]
        # above the threshold already (strictly greater): at once, even with a long timeout
        t0 = time.monotonic()
        assert c.ask(msg(WAIT_DAT, waitdef(4, ALL, 60_000))) == reply(WAIT_OK, struct.pack("<II", 5, 0))
        assert time.monotonic() - t0 < 5
        # equal is not greater: waits for the timeout, then answers the counts
        t0 = time.monotonic()
        assert c.ask(msg(WAIT_DAT, waitdef(5, 0, 300))) == reply(WAIT_OK, struct.pack("<II", 5, 0))
        assert time.monotonic() - t0 >= 0.28
        # woken by another client's PUT_DAT
        errors: List[BaseException] = []

        def later(m: bytes) -> None:
            time.sleep(0.3)
            try:
                assert w.ask(m) == OK[PUT_OK]
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        t = threading.Thread(target=later, args=(msg(PUT_DAT, datadef(1, 1, FLOAT64, samples(FLOAT64, [1.0]))),))
        t0 = time.monotonic()  # before the thread starts: its PUT_DAT comes >= 0.3 s after this
        t.start()
        assert c.ask(msg(WAIT_DAT, waitdef(5, ALL, 30_000))) == reply(WAIT_OK, struct.pack("<II", 6, 0))
        took = time.monotonic() - t0
        t.join(30)
        assert not errors, errors
        assert 0.29 <= took < 10
        # and (unlike the reference) by a PUT_EVT
        t = threading.Thread(target=later, args=(msg(PUT_EVT, event(CHAR, b"e", CHAR, b"v", 0)),))
        t.start()
        t0 = time.monotonic()
        assert c.ask(msg(WAIT_DAT, waitdef(ALL, 0, 30_000))) == reply(WAIT_OK, struct.pack("<II", 6, 1))
        took = time.monotonic() - t0
        t.join(30)
        assert not errors, errors
        assert took < 10
        # timeout 0: a poll
        assert c.ask(msg(WAIT_DAT, waitdef(ALL, ALL, 0))) == reply(WAIT_OK, struct.pack("<II", 6, 1))


def test_idle_and_stalled_clients_do_not_disturb_others(srv: FieldTripServer) -> None:
    # t0 before the stalled client connects: the server cannot drop it sooner than the
    # message timeout after this, however late this thread runs afterwards
    t0 = time.monotonic()
    idle = Conn(srv)  # connects and says nothing
    stalled = Conn(srv)  # stops in the middle of a prefix
    try:
        stalled.send(prefix(GET_HDR, 0)[:5])
        stored = seed(srv)
        assert_intact(srv, stored)
        with Conn(srv, unix=True) as c:
            for _ in range(50):
                assert c.ask(msg(WAIT_DAT, waitdef(0, 0, 0))) == reply(WAIT_OK, struct.pack("<II", 10, 3))
        # --message-timeout 2: the stalled client is dropped, silently
        stalled.expect_closed(within=15)
        assert time.monotonic() - t0 >= 1.5
        # between messages a client may stay idle as long as it likes
        assert idle.ask(msg(GET_HDR)) == stored.get_hdr
        assert_intact(srv, stored)
    finally:
        idle.close()
        stalled.close()


def test_many_connections_at_once(srv: FieldTripServer) -> None:
    stored = seed(srv)
    errors: List[BaseException] = []

    def client(i: int) -> None:
        try:
            with Conn(srv, unix=bool(i % 2)) as c:
                for _ in range(30):
                    assert c.ask(msg(GET_HDR)) == stored.get_hdr
                    assert c.ask(msg(GET_DAT, sel(i % 10, i % 10))) == reply(
                        GET_OK, datadef(3, 1, FLOAT32, samples(FLOAT32, DATA[3 * (i % 10) : 3 * (i % 10) + 3]))
                    )
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    assert_intact(srv, stored)
