"""`rtloop.fieldtrip.Client` against `rtloop serve` (a real process, real sockets): every call
over TCP and the UNIX socket, the data shared with rtloop streams both ways, waiting, many
clients, one request per connection, and each bad argument or refusal."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, List

import numpy as np
import pytest

import rtloop
from rtloop.fieldtrip import Client, Event, FieldTripError

TRANSPORTS = ["tcp", "unix"]


def connect(srv: Any, transport: str) -> Client:
    """A client of `srv` over `transport`, spelled both ways `connect` accepts."""
    c = Client()
    if transport == "tcp":
        c.connect(srv.host, srv.port)
    else:
        c.connect(path=srv.unix)
    return c


def address(srv: Any, transport: str) -> str:
    return srv.address if transport == "tcp" else f"unix:{srv.unix}"


class Later:
    """Run `fn` in a thread after `delay` seconds; `join()` re-raises what it raised."""

    def __init__(self, delay: float, fn: Callable[[], Any]) -> None:
        self.error: List[BaseException] = []

        def run() -> None:
            time.sleep(delay)
            try:
                fn()
            except BaseException as e:  # noqa: BLE001
                self.error.append(e)

        self.thread = threading.Thread(target=run)
        self.thread.start()

    def join(self) -> None:
        self.thread.join(30)
        assert not self.thread.is_alive()
        if self.error:
            raise self.error[0]


@pytest.fixture(params=TRANSPORTS)
def transport(request: Any) -> str:
    return str(request.param)


@pytest.fixture
def client(ft_server: Any, transport: str) -> Iterator[Client]:
    c = connect(ft_server, transport)
    yield c
    c.close()


def test_every_call(ft_server: Any, transport: str) -> None:
    with connect(ft_server, transport) as c:
        assert c.connected and address(ft_server, transport) in repr(c)
        with pytest.raises(FieldTripError, match=r"GET_HDR refused by the server at .* \(GET_ERR\): there is no header"):
            c.get_header()
        c.put_header(3, 500.0, "float32", labels=["Fz", "Cz", "Pz"], chunks={42: b"\x00opaque\xff", 0: b""})
        h = c.get_header()
        assert (h.n_channels, h.n_samples, h.n_events, h.fsample) == (3, 0, 0, 500.0)
        assert h.data_type == np.float32 and h.labels == ["Fz", "Cz", "Pz"]
        assert h.chunks[1] == b"Fz\0Cz\0Pz\0"  # NUL-terminated, concatenated
        assert h.chunks[42] == b"\x00opaque\xff" and h.chunks[0] == b""  # byte-exact
        assert (h.nChannels, h.nSamples, h.nEvents, h.fSample, h.dataType) == (3, 0, 0, 500.0, 9)

        x = np.arange(30, dtype=np.float32).reshape(10, 3)
        c.put_data(x)
        c.put_data(x[0])  # 1-D: one sample
        np.testing.assert_array_equal(c.get_data(0, 9), x)
        np.testing.assert_array_equal(c.get_data(10, 10), x[:1])
        np.testing.assert_array_equal(c.get_data(), np.vstack([x, x[:1]]))  # everything kept
        np.testing.assert_array_equal(c.get_data(8), np.vstack([x[8:], x[:1]]))  # to the newest
        t_put = time.monotonic()
        c.put_data(x, response=False)  # PUT_DAT_NORESPONSE
        assert c.poll() == (21, 0)

        c.put_events([Event("trigger", "go", 3, 1, 2), {"type": "level", "value": np.array([1.5, -2.0]), "sample": 4}])
        c.put_events(("stim", 7, -1))  # sample -1: the server fills it in
        dt = time.monotonic() - t_put
        evs = c.get_events()
        assert [(e.type, e.value, e.sample, e.offset, e.duration) for e in evs[:1]] == [("trigger", "go", 3, 1, 2)]
        assert (evs[1].type, evs[1].sample) == ("level", 4)
        np.testing.assert_array_equal(evs[1].value, [1.5, -2.0])
        assert evs[1].value.dtype == np.float64
        assert evs[2].type == "stim" and evs[2].value == 7
        # nsamples + fsample x (time since the last PUT_DAT)
        assert 21 <= evs[2].sample <= 21 + int(500.0 * dt) + 1
        assert [e.type for e in c.get_events(1, 1)] == ["level"]
        assert [e.type for e in c.get_events(1)] == ["level", "stim"]
        assert c.get_events(1, 0) == []  # begin = end + 1
        with pytest.raises(FieldTripError, match=r"GET_EVT \[3, 3\] refused .*GET_ERR.*it holds events 0\.\.2"):
            c.get_events(3, 3)
        c.put_events(Event(np.int32(5), np.array([1, 2, 3], np.uint16), 0), response=False)  # PUT_EVT_NORESPONSE
        assert c.wait(0, 0, 0) == (21, 4)
        e = c.get_events(3, 3)[0]
        assert e.type == 5 and isinstance(e.type, int)
        assert e.value.dtype == np.uint16 and e.value.tolist() == [1, 2, 3]

        c.flush("events")
        assert c.poll() == (21, 0)
        with pytest.raises(FieldTripError, match="GET_EVT refused.*no events"):
            c.get_events()
        c.flush_data()
        assert c.poll() == (0, 0)
        h = c.get_header()  # the header stays
        assert (h.n_channels, h.n_samples, h.labels, h.chunks[42]) == (3, 0, ["Fz", "Cz", "Pz"], b"\x00opaque\xff")
        c.put_data(x[:2] + 1)  # indices restart at 0
        np.testing.assert_array_equal(c.get_data(0, 1), x[:2] + 1)
        c.put_events(Event("a", "b", 0))

        c.put_header(2, 1000.0, np.int16)  # a new header resets samples and events
        h = c.get_header()
        assert (h.n_channels, h.n_samples, h.n_events, h.data_type, h.labels) == (2, 0, 0, np.int16, [])
        y = np.array([[1, -1], [2, -2]], dtype=np.int16)
        c.put_data(y)
        np.testing.assert_array_equal(c.get_data(0, 1), y)
        c.flush_header()
        with pytest.raises(FieldTripError, match="GET_HDR"):
            c.get_header()
        with pytest.raises(FieldTripError, match=r"GET_DAT refused.*no header"):
            c.get_data()
        with pytest.raises(FieldTripError, match=r"FLUSH_DAT refused.*FLUSH_ERR.*no header"):
            c.flush("data")
        with pytest.raises(FieldTripError, match=r"WAIT_DAT refused.*WAIT_ERR"):
            c.poll()
        assert c.getHeader() is None  # FieldTrip.py's spelling, and its None
    assert not c.connected


@pytest.mark.parametrize("dtype", ["float32", "int16", "float64", "uint8", "int8", "uint16", "int32", "uint32", "int64", "uint64"])
def test_every_dtype_round_trips_identically(ft_server: Any, transport: str, dtype: str) -> None:
    rng = np.random.default_rng(7)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        x = rng.standard_normal((50, 5)).astype(dt)
        x[0] = [np.nan, np.inf, -np.inf, -0.0, np.finfo(dt).tiny]
    else:
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, size=(50, 5), dtype=dt, endpoint=True)
        x[0] = [info.min, info.max, 0, 1, info.max - 1]
    with connect(ft_server, transport) as c:
        c.put_header(5, 100.0, dtype)
        assert c.get_header().data_type == dt
        c.put_data(x[:20])
        c.put_data(x[20:])
        got = c.get_data(0, 49)
        assert got.dtype == dt and got.shape == (50, 5)
        assert got.tobytes() == x.tobytes()  # bit-identical, NaN payloads and -0.0 too
        assert c.get_data(17, 23).tobytes() == x[17:24].tobytes()


def test_selections_are_inclusive_and_bad_ones_are_refused(client: Client) -> None:
    c = client
    c.put_header(4, 100.0, "int32")
    x = np.arange(80, dtype=np.int32).reshape(20, 4)
    c.put_data(x)
    for b, e in [(0, 0), (0, 19), (5, 9), (19, 19), (3, 18)]:
        np.testing.assert_array_equal(c.get_data(b, e), x[b : e + 1])
    np.testing.assert_array_equal(c.getData([5, 9]), x[5:10])
    np.testing.assert_array_equal(c.get_data(end=2), x[:3])
    for b in (1, 7, 19):  # begin = end + 1: an empty (0, channels) array
        got = c.get_data(b, b - 1)
        assert got.shape == (0, 4) and got.dtype == np.int32
    bad = {
        (5, 3): r"GET_DAT \[5, 3\] refused by the server at .* \(GET_ERR\): the selection is backwards \(begin 5 > end 3 \+ 1\); it holds samples 0\.\.19",
        (0, 20): r"GET_DAT \[0, 20\] refused .*GET_ERR.*not in the buffer yet; it holds samples 0\.\.19",
        (25, 30): r"GET_DAT \[25, 30\] refused .*not in the buffer yet",
        (20, 25): r"GET_DAT \[20, 25\] refused",
        (10, 0xFFFFFFFE): r"GET_DAT \[10, 4294967294\] refused",
    }
    for (b, e), msg in bad.items():
        with pytest.raises(FieldTripError, match=msg):
            c.get_data(b, e)
        assert c.getData([b, e]) is None
        # the server (and this connection) keep working after each refusal
        np.testing.assert_array_equal(c.get_data(18, 19), x[18:])
    assert c.poll() == (20, 0)


def test_wait_returns_when_data_arrive_and_after_the_timeout(ft_server: Any, transport: str) -> None:
    other = "unix" if transport == "tcp" else "tcp"
    with connect(ft_server, transport) as c, connect(ft_server, other) as w:
        c.put_header(1, 10.0, "float32")
        # t0 before the writer's thread starts: the data cannot come sooner than 0.3 s after
        # it, however late this thread runs
        t0 = time.monotonic()
        later = Later(0.3, lambda: w.put_data(np.ones((4, 1), np.float32)))
        assert c.wait(0, 10, 20_000) == (4, 0)
        took = time.monotonic() - t0
        later.join()
        assert 0.29 <= took < 10, f"WAIT_DAT returned after {took:.2f} s, not when the data came"
        # thresholds are strict: 4 samples do not pass 4
        t0 = time.monotonic()
        assert c.wait(4, 100, 300) == (4, 0)
        assert time.monotonic() - t0 >= 0.28
        assert c.wait(3, 100, 20_000) == (4, 0)  # at once
        # rtloop wakes waiters on events too (the reference only on data)
        later = Later(0.3, lambda: w.put_events(Event("t", "v", 0)))
        t0 = time.monotonic()
        assert c.wait(4, 0, 20_000) == (4, 1)
        later.join()
        assert time.monotonic() - t0 < 10
        assert c.poll() == (4, 1) and c.wait(0, 0, 0) == (4, 1)


def test_many_clients_at_once(ft_server: Any) -> None:
    n, rows = 8, 60
    with Client.open(ft_server.address) as w:
        w.put_header(8, 1000.0, "float32")
        errors: List[BaseException] = []
        ready = threading.Barrier(n + 1)

        def reader(i: int) -> None:
            try:
                with Client.open(ft_server.address if i % 2 else f"unix:{ft_server.unix}") as r:
                    ready.wait(30)
                    seen = 0
                    while seen < rows:
                        seen = r.wait(seen, 0xFFFFFFF0, 10_000)[0]
                        last = r.get_data(seen - 1, seen - 1)
                        assert last.tolist() == [[seen - 1.0] * 8]
                    np.testing.assert_array_equal(r.get_data()[:, 0], np.arange(rows))
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=reader, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        ready.wait(30)
        for i in range(rows):
            w.put_data(np.full((1, 8), i, np.float32))
            time.sleep(0.001)
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        assert not errors, errors


def test_one_request_per_connection(ft_server: Any, transport: str) -> None:
    """The old MATLAB way: a new connection for every request."""
    addr = address(ft_server, transport)

    def once(f: Callable[[Client], Any]) -> Any:
        with Client.open(addr) as c:
            return f(c)

    once(lambda c: c.put_header(2, 250.0, "int16", labels=["x", "y"]))
    assert once(lambda c: c.get_header()).labels == ["x", "y"]
    for i in range(20):
        once(lambda c: c.put_data(np.full((3, 2), i, np.int16)))
    once(lambda c: c.put_events([Event("n", i, 3 * i) for i in range(5)]))
    assert once(lambda c: c.poll()) == (60, 5)
    assert once(lambda c: c.wait(10, 1, 1000)) == (60, 5)
    np.testing.assert_array_equal(once(lambda c: c.get_data(57, 59)), np.full((3, 2), 19))
    assert [e.value for e in once(lambda c: c.get_events(2, 4))] == [2, 3, 4]
    with pytest.raises(FieldTripError):
        once(lambda c: c.get_data(60, 60))
    once(lambda c: c.flush_events())
    once(lambda c: c.flush_data())
    assert once(lambda c: c.poll()) == (0, 0)
    once(lambda c: c.flush_header())
    assert once(lambda c: c.getHeader()) is None


def test_large_blocks_and_foreign_arrays(client: Client) -> None:
    c = client
    c.put_header(64, 30000.0, "float32")
    big = np.random.default_rng(1).standard_normal((30_000, 64)).astype(np.float32)  # 7.7 MB
    c.put_data(big)
    assert c.get_data().tobytes() == big.tobytes()
    # not C-contiguous, big-endian: sent as the same values, little-endian
    c.put_header(3, 1.0, "int16")
    f = np.asfortranarray(np.arange(12, dtype=">i2").reshape(4, 3))
    c.put_data(f)
    c.put_data(np.arange(30, dtype=np.int16).reshape(10, 3)[::2])  # strided
    np.testing.assert_array_equal(c.get_data(0, 3), np.arange(12).reshape(4, 3))
    np.testing.assert_array_equal(c.get_data(4, 8), np.arange(30).reshape(10, 3)[::2])
    c.put_data(np.zeros((0, 3), np.int16))  # nothing to add: PUT_OK
    assert c.poll() == (9, 0)


def test_fieldtrip_py_names(client: Client) -> None:
    c = client
    c.putHeader(2, 100.0, 10, labels=["a", "b"], chunks=[(42, b"k")])
    h = c.getHeader()
    assert h is not None and (h.nChannels, h.dataType, h.labels, h.chunks[42]) == (2, 10, ["a", "b"], b"k")
    c.putData(np.ones((3, 2)))
    np.testing.assert_array_equal(c.getData([1, 2]), np.ones((2, 2)))
    np.testing.assert_array_equal(c.getData(), np.ones((3, 2)))
    assert c.getData([5, 9]) is None  # refused: None, as FieldTrip.py
    c.putEvents(Event("k", "v", 1))
    c.putEvents([Event("k", "w", 2)])
    assert [e.value for e in c.getEvents()] == ["v", "w"]
    assert [e.value for e in c.getEvents([1, 1])] == ["w"]
    assert c.getEvents([7, 7]) == []
    assert c.wait(2, 1, 0) == (3, 2) and c.poll() == (3, 2)
    c.flushEvents()
    c.flushData()
    assert c.poll() == (0, 0)
    c.flushHeader()
    assert c.getHeader() is None
    assert c.isConnected
    c.disconnect()
    assert not c.isConnected


def test_data_put_over_the_network_are_an_rtloop_stream(ft_server: Any, transport: str) -> None:
    with connect(ft_server, transport) as c:
        c.put_header(2, 250.0, "float64", labels=["a", "b"])
        x = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        c.put_data(x)
        c.put_events(Event("go", "now", 1))
        s = rtloop.Stream.open(ft_server.stream)
        assert (s.ch_names, s.sfreq, s.dtype, s.n_channels) == (["a", "b"], 250.0, np.float64, 2)
        r = s.reader(mode="latest")
        try:
            view = r.window(0, 3)  # zero-copy, the stream's own memory
            assert not view.flags.writeable
            np.testing.assert_array_equal(view, x)
            data, stamps = r.read(0, 3)  # a copy
            np.testing.assert_array_equal(data, x)
            assert stamps.shape == (3,)
            c.put_data(x + 10)
            np.testing.assert_array_equal(r.window(3, 6), x + 10)
            ev = r.read_events(0, 1)[0]
            assert (ev.type, ev.value, ev.sample) == ("go", "now", 1)
        finally:
            r.close()


def test_a_local_stream_is_served(tmp_path: Path, make_name: Callable[[], str], transport: str) -> None:
    from conftest import FieldTripServer

    name = make_name()
    local = rtloop.Stream.create(name, n_channels=3, dtype="int16", sfreq=30000.0, capacity=1000)
    w = local.writer()
    srv = None
    try:
        x = np.arange(9, dtype=np.int16).reshape(3, 3)
        w.push_chunk(x)
        w.push_event("marker", 5, 1)
        srv = FieldTripServer(tmp_path, name)
        with connect(srv, transport) as c:
            h = c.get_header()
            assert (h.n_channels, h.n_samples, h.n_events, h.fsample, h.data_type) == (3, 3, 1, 30000.0, np.int16)
            assert len(h.labels) == 3
            np.testing.assert_array_equal(c.get_data(), x)
            np.testing.assert_array_equal(c.get_data(1, 2), x[1:])
            assert [(e.type, e.value, e.sample) for e in c.get_events()] == [("marker", 5, 1)]
            # WAIT_DAT wakes when the local writer pushes
            later = Later(0.2, lambda: w.push_chunk(np.full((2, 3), 7, np.int16)))
            t0 = time.monotonic()
            assert c.wait(3, 1000, 10_000) == (5, 1)
            later.join()
            assert time.monotonic() - t0 < 5
            np.testing.assert_array_equal(c.get_data(3, 4), np.full((2, 3), 7))
            with pytest.raises(FieldTripError, match="PUT_DAT refused"):
                c.put_data(np.zeros((1, 3), np.int16))  # the local writer owns the stream
            assert c.poll() == (5, 1)
    finally:
        if srv is not None:
            srv.stop()
        w.close()


def test_bad_arguments_are_refused_before_sending(client: Client) -> None:
    c = client
    with pytest.raises(ValueError, match="allowed: uint8, uint16"):
        c.put_header(2, 1.0, "complex64")
    with pytest.raises(ValueError, match="allowed: uint8"):
        c.put_header(2, 1.0, 0)  # char cannot hold samples
    with pytest.raises(TypeError, match="not a numpy dtype"):
        c.put_header(2, 1.0, "no-such-type")
    with pytest.raises(ValueError, match="at least 1"):
        c.put_header(0, 1.0, "float32")
    with pytest.raises(ValueError, match="one per channel"):
        c.put_header(2, 1.0, "float32", labels=["a"])
    with pytest.raises(ValueError, match="NUL"):
        c.put_header(2, 1.0, "float32", labels=["a", "b\0c"])
    with pytest.raises(ValueError, match="finite"):
        c.put_header(2, float("nan"), "float32")
    with pytest.raises(TypeError, match="chunk 7 must be bytes"):
        c.put_header(2, 1.0, "float32", chunks={7: "text"})
    c.put_header(2, 1.0, "float32")
    with pytest.raises(ValueError, match="3 channels, the header 2"):
        c.put_data(np.zeros((1, 3), np.float32))
    with pytest.raises(ValueError, match=r"float64, the header float32: convert them first \(data.astype\(np.float32\)\)"):
        c.put_data(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="2-D"):
        c.put_data(np.zeros((1, 2, 2), np.float32))
    with pytest.raises(ValueError, match="allowed: uint8"):
        c.put_data(np.zeros((1, 2), bool))
    with pytest.raises(ValueError, match="0-based|0\\.\\."):
        c.get_data(-1, 3)
    with pytest.raises(ValueError, match="unsigned 32-bit"):
        c.wait(2**32, 0, 0)
    with pytest.raises(ValueError, match="allowed: header, data, events"):
        c.flush("everything")
    with pytest.raises(TypeError, match="event 0"):
        c.put_events([object()])
    with pytest.raises(TypeError, match="event 1"):
        c.put_events([Event("a", "b", 0), ("a",)])
    with pytest.raises(TypeError, match="neither text"):
        c.put_events(Event("a", None, 0))
    with pytest.raises(ValueError, match="signed 32-bit"):
        c.put_events(Event("a", "b", 2**31))
    c.put_events([])  # nothing to send
    assert c.poll() == (0, 0)  # nothing reached the server
    assert c.get_header().n_channels == 2


def test_refusals_say_why(client: Client) -> None:
    c = client
    with pytest.raises(FieldTripError, match=r"PUT_DAT refused by the server at .* \(PUT_ERR\): there is no header"):
        c.put_data(np.zeros((1, 2), np.float32))
    with pytest.raises(FieldTripError, match=r"PUT_EVT refused .*PUT_ERR.*no header"):
        c.put_events(Event("a", "b", 0))
    with pytest.raises(FieldTripError, match=r"FLUSH_HDR refused .*FLUSH_ERR.*no header"):
        c.flush_header()
    c.put_header(2, 1.0, "float32")
    # another client changes the header behind this one's back: the server refuses
    with Client.open(c.address) as other:
        other.put_header(3, 1.0, "int16")
    with pytest.raises(FieldTripError, match=r"PUT_DAT refused .*PUT_ERR.*2 channels of float32, the header says 3 channels of int16"):
        c.put_data(np.zeros((1, 2), np.float32))
    c.put_data(np.zeros((1, 3), np.int16))  # it learnt the header from the refusal
    assert c.poll() == (1, 0)


def test_a_lost_connection_names_the_server(tmp_path: Path, make_name: Callable[[], str], transport: str) -> None:
    from conftest import FieldTripServer

    srv = FieldTripServer(tmp_path, make_name())
    try:
        c = connect(srv, transport)
        c.put_header(1, 1.0, "uint8")
    finally:
        srv.stop()
    with c:
        with pytest.raises(ConnectionError, match=f"FieldTrip buffer at {address(srv, transport)}"):
            c.get_header()
        assert not c.connected  # closed, not left out of step
        with pytest.raises(ConnectionError, match="not connected"):
            c.poll()
    with pytest.raises(ConnectionError, match=f"cannot connect to the FieldTrip buffer at {address(srv, transport)}"):
        Client.open(address(srv, transport))


def test_addresses() -> None:
    from rtloop.fieldtrip import _parse_address

    assert _parse_address("localhost", 1972) == ("localhost", 1972)
    assert _parse_address("buffer://example.org:1973", 1972) == ("example.org", 1973)
    assert _parse_address("tcp://10.0.0.1:5", 1972) == ("10.0.0.1", 5)
    assert _parse_address("[::1]:1974", 1972) == ("::1", 1974)
    assert _parse_address("buffer://host", 1975) == ("host", 1975)
    with pytest.raises(ValueError, match="port"):
        _parse_address("host:abc", 1972)


def test_the_server_logs_each_refusal(ft_server: Any) -> None:
    with Client.open(ft_server.address) as c:
        with pytest.raises(FieldTripError):
            c.get_data(0, 0)
    log = ft_server.stop()
    assert "GET_DAT refused (GET_ERR)" in log


def test_events_the_reference_stores_come_back_exactly(ft_server: Any) -> None:
    """Events larger than a stream event slot, and char text that is not UTF-8, are kept
    whole by the server (the stream holds a stand-in); the reference stores them too."""
    long_text = "n" * 5000
    latin1 = b"caf\xe9 \xff"
    matrix = np.arange(200, dtype=np.float64)
    with Client.open(ft_server.address) as c:
        c.put_header(2, 100.0, "float32")
        c.put_events([
            Event("trigger", "go", sample=0),
            Event("note", long_text, sample=1),
            Event(latin1, latin1, sample=2, offset=-1, duration=3),
            Event("matrix", matrix, sample=3),
        ])
        back = c.get_events()
    assert [(e.type, e.sample) for e in back] == [("trigger", 0), ("note", 1), (latin1, 2), ("matrix", 3)]
    assert back[1].value == long_text
    assert back[2].value == latin1 and (back[2].offset, back[2].duration) == (-1, 3)
    np.testing.assert_array_equal(back[3].value, matrix)
    # rtloop readers of the stream see stand-ins that say where the whole events are
    r = rtloop.Stream.open(ft_server.stream).reader(start="oldest")
    evs = r.pull_events()
    assert evs[0].value == "go"
    assert evs[1].value == "5000 bytes kept whole by the FieldTrip server"


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_polling_client_is_answered_fast_and_a_quiet_one_costs_nothing(
    ft_server: Any, transport: str
) -> None:
    """By default `rtloop serve` polls for a client in a GET_DAT loop (the loop FieldTrip
    clients run to follow the data) and sleeps once its clients are quiet: with connections
    open and nothing asked, the server uses no CPU."""
    clients = [connect(ft_server, transport) for _ in range(2)]
    clients[0].put_header(3, 250.0, np.float32)
    block = np.arange(30, dtype=np.float32).reshape(10, 3)
    clients[0].put_data(block)
    for c in clients:
        for _ in range(300):
            np.testing.assert_array_equal(c.get_data(8, 9), block[8:10])
    time.sleep(0.2)
    before = _cpu_seconds(ft_server.proc.pid)
    time.sleep(1.0)
    used = _cpu_seconds(ft_server.proc.pid) - before
    # a thread left polling would use about a second of CPU here; a sleeping server, ticks
    assert used < 0.2, f"a quiet server used {used:.2f} s of CPU in 1 s"
    assert clients[1].get_header().n_samples == 10
    for c in clients:
        c.close()


def test_a_server_started_from_python_serves_clients_into_its_stream(tmp_path: Path, make_name: Callable[[], str]) -> None:
    """`rtloop.fieldtrip.Server` is `rtloop serve`'s server in this process: a client's
    header and samples land in the stream, over TCP (a free port) and a UNIX socket; stop()
    closes it and removes the stream (unless keep)."""
    from rtloop.fieldtrip import Server

    name = make_name()
    sock = tmp_path / "ft.sock"
    with Server(name, bind="127.0.0.1:0", unix=str(sock)) as srv:
        host, port = srv.tcp_address or ("", 0)
        assert host == "127.0.0.1" and port > 0 and srv.unix_path == str(sock)
        assert srv.address == f"127.0.0.1:{port}" and srv.stream == name
        with Client.open(srv.address) as c:
            c.put_header(3, 500.0, "int16", labels=["a", "b", "c"])
            data = np.arange(30, dtype=np.int16).reshape(10, 3)
            c.put_data(data)
            assert srv.clients == 1
        with Client.open(f"unix:{sock}") as c:
            np.testing.assert_array_equal(c.get_data(0, 9), data)
        s = rtloop.Stream.open(name)
        assert s.written == 10 and s.ch_names == ["a", "b", "c"]
        np.testing.assert_array_equal(s.reader().read(0, 10)[0], data)
    assert not srv.running and name not in rtloop.Stream.list()
    with pytest.raises(ConnectionError):
        Client.open(f"127.0.0.1:{port}")


def test_server_options_are_refused_saying_what_is_allowed(make_name: Callable[[], str]) -> None:
    from rtloop.fieldtrip import Server

    with pytest.raises(ValueError, match="tcp=False needs unix=PATH"):
        Server(make_name(), tcp=False)
    with pytest.raises(ValueError, match="max_clients=0: allowed 1 to 65536"):
        Server(make_name(), bind="127.0.0.1:0", max_clients=0)
    with pytest.raises(ValueError, match="message_timeout=0: a number of seconds > 0"):
        Server(make_name(), bind="127.0.0.1:0", message_timeout=0)
    # the library's limits, with this class's keyword names
    with pytest.raises(ValueError, match="max_message=10: allowed 64 to 4294967295"):
        Server(make_name(), bind="127.0.0.1:0", max_message=10)
    with pytest.raises(ValueError, match="events=0: allowed 1 to 1000000"):
        Server(make_name(), bind="127.0.0.1:0", events=0)
    with pytest.raises(ValueError, match=r"memory_mb: memory_budget=0 bytes \(0 MiB\): allowed 1 to 1048576 MiB"):
        Server(make_name(), bind="127.0.0.1:0", memory_mb=0)
    with pytest.raises(ValueError, match='poll="often"'):
        Server(make_name(), bind="127.0.0.1:0", poll="often")
    with pytest.raises(ValueError, match='stream="bad/name"'):
        Server("bad/name", bind="127.0.0.1:0")
    with Server(make_name(), bind="127.0.0.1:0") as srv:
        with pytest.raises(OSError, match="cannot listen"):
            Server(make_name(), bind=srv.address)
