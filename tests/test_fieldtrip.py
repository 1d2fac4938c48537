"""`rtloop.fieldtrip.Client` against `rtloop serve` (a real process, real sockets): every call
over TCP and the UNIX socket, the data shared with rtloop streams, and each bad input."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, List

import numpy as np
import pytest

import rtloop
from rtloop.fieldtrip import Client, Event, FieldTripError


def clients(srv: Any) -> List[Client]:
    tcp = Client()
    tcp.connect(srv.host, srv.port)
    unix = Client.open(f"unix:{srv.unix}")
    return [tcp, unix]


@pytest.mark.parametrize("transport", [0, 1], ids=["tcp", "unix"])
def test_every_call(ft_server: Any, transport: int) -> None:
    cs = clients(ft_server)
    c = cs[transport]
    try:
        with pytest.raises(FieldTripError, match="GET_HDR refused.*no header"):
            c.get_header()
        c.put_header(3, 500.0, "float32", labels=["Fz", "Cz", "Pz"], chunks={42: b"\x00opaque\xff"})
        h = c.get_header()
        assert (h.n_channels, h.n_samples, h.n_events, h.fsample) == (3, 0, 0, 500.0)
        assert h.data_type == np.float32 and h.labels == ["Fz", "Cz", "Pz"]
        assert h.chunks[42] == b"\x00opaque\xff"  # byte-exact

        x = np.arange(30, dtype=np.float32).reshape(10, 3)
        c.put_data(x)
        c.put_data(x[0])  # one sample
        np.testing.assert_array_equal(c.get_data(0, 9), x)
        np.testing.assert_array_equal(c.get_data(10, 10), x[:1])
        np.testing.assert_array_equal(c.get_data(), np.vstack([x, x[:1]]))
        np.testing.assert_array_equal(c.get_data(8), np.vstack([x[8:], x[:1]]))  # to the newest
        assert c.get_data(5, 4).shape == (0, 3)  # begin = end + 1
        with pytest.raises(FieldTripError, match=r"GET_DAT \[5, 3\] refused"):
            c.get_data(5, 3)  # the reference server crashes here
        with pytest.raises(FieldTripError, match="GET_ERR"):
            c.get_data(0, 11)
        c.put_data(x, response=False)  # PUT_DAT_NORESPONSE
        assert c.poll() == (21, 0)

        c.put_events([Event("trigger", "go", 3), {"type": "level", "value": np.array([1.5, -2.0]), "sample": 4}])
        c.put_events(("stim", 7, -1))  # sample -1: the server fills it in
        evs = c.get_events()
        assert [(e.type, e.sample) for e in evs[:2]] == [("trigger", 3), ("level", 4)]
        assert evs[0].value == "go"
        np.testing.assert_array_equal(evs[1].value, [1.5, -2.0])
        assert evs[2].value == 7 and evs[2].sample >= 21
        assert [e.type for e in c.get_events(1, 1)] == ["level"]
        with pytest.raises(FieldTripError, match="GET_EVT"):
            c.get_events(3, 3)
        assert c.wait(0, 0, 0) == (21, 3)

        c.flush("events")
        assert c.poll() == (21, 0)
        c.flush_data()
        assert c.poll() == (0, 0)
        c.put_header(2, 1000.0, np.int16)  # a new header resets everything
        assert c.get_header().n_samples == 0
        y = np.array([[1, -1], [2, -2]], dtype=np.int16)
        c.put_data(y)
        np.testing.assert_array_equal(c.get_data(0, 1), y)
        c.flush_header()
        with pytest.raises(FieldTripError, match="GET_HDR"):
            c.get_header()
        assert c.getHeader() is None  # FieldTrip.py's spelling and its None
    finally:
        for k in cs:
            k.close()


@pytest.mark.parametrize("dtype", ["uint8", "int16", "int32", "float32", "float64", "uint64"])
def test_every_dtype_round_trips(ft_server: Any, dtype: str) -> None:
    with Client.open(ft_server.address) as c:
        c.put_header(4, 100.0, dtype)
        x = (np.arange(40) % 100).astype(dtype).reshape(10, 4)
        c.put_data(x)
        got = c.get_data(0, 9)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, x)


def test_data_are_an_rtloop_stream_both_ways(ft_server: Any, make_name: Callable[[], str], tmp_path: Any) -> None:
    # network -> shared memory
    with Client.open(ft_server.address) as c:
        c.put_header(2, 250.0, "float64", labels=["a", "b"])
        c.put_data(np.array([[1.0, 2.0], [3.0, 4.0]]))
        s = rtloop.Stream.open(ft_server.stream)
        assert s.ch_names == ["a", "b"] and s.sfreq == 250.0
        r = s.reader(mode="latest")
        np.testing.assert_array_equal(r.window(0, 2), [[1.0, 2.0], [3.0, 4.0]])
        r.close()
    # a stream written locally -> served to the network
    from conftest import FieldTripServer

    name = make_name()
    local = rtloop.Stream.create(name, n_channels=3, dtype="int16", sfreq=30000.0, capacity=1000)
    w = local.writer()
    w.push_chunk(np.arange(9, dtype=np.int16).reshape(3, 3))
    (tmp_path / "local").mkdir()
    srv = FieldTripServer(tmp_path / "local", name)
    try:
        with Client.open(srv.address) as c:
            h = c.get_header()
            assert (h.n_channels, h.n_samples, h.data_type) == (3, 3, np.int16)
            np.testing.assert_array_equal(c.get_data(), np.arange(9).reshape(3, 3))
            # WAIT_DAT wakes when the local writer pushes
            threading.Timer(0.2, lambda: w.push_chunk(np.ones((2, 3), np.int16))).start()
            t0 = time.monotonic()
            assert c.wait(3, 1000, 10_000)[0] == 5
            assert time.monotonic() - t0 < 5
            with pytest.raises(FieldTripError, match="PUT_DAT"):
                c.put_data(np.zeros((1, 3), np.int16))  # the local writer owns the stream
    finally:
        srv.stop()
        w.close()


def test_wait_returns_when_data_arrive_and_on_timeout(ft_server: Any) -> None:
    with Client.open(ft_server.address) as c, Client.open(f"unix:{ft_server.unix}") as p:
        c.put_header(1, 10.0, "float32")
        threading.Timer(0.2, lambda: p.put_data(np.ones((4, 1), np.float32))).start()
        t0 = time.monotonic()
        assert c.wait(0, 10, 20_000) == (4, 0)
        assert time.monotonic() - t0 < 10
        t0 = time.monotonic()
        assert c.wait(100, 100, 150) == (4, 0)
        assert time.monotonic() - t0 >= 0.14


def test_many_clients_and_one_request_per_connection(ft_server: Any) -> None:
    with Client.open(ft_server.address) as w:
        w.put_header(8, 1000.0, "float32")
        errors: List[BaseException] = []

        def reader(i: int) -> None:
            try:
                with Client.open(ft_server.address if i % 2 else f"unix:{ft_server.unix}") as r:
                    seen = 0
                    while seen < 50:
                        seen = r.wait(seen, 0xFFFFFFF0, 5000)[0]
                        row = r.get_data(seen - 1, seen - 1)
                        assert row[0, 0] == seen - 1
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for i in range(50):
            w.put_data(np.full((1, 8), i, np.float32))
            time.sleep(0.002)
        for t in threads:
            t.join(30)
        assert not errors, errors
    # stateless: a new connection for every request
    for i in range(20):
        with Client.open(ft_server.address) as c:
            c.put_data(np.full((1, 8), 100 + i, np.float32))
    with Client.open(ft_server.address) as c:
        assert c.poll()[0] == 70


def test_bad_arguments_are_refused_before_sending(ft_server: Any) -> None:
    with Client.open(ft_server.address) as c:
        with pytest.raises(ValueError, match="allowed: uint8"):
            c.put_header(2, 1.0, "complex64")
        with pytest.raises(ValueError, match="at least 1"):
            c.put_header(0, 1.0, "float32")
        with pytest.raises(ValueError, match="one per channel"):
            c.put_header(2, 1.0, "float32", labels=["a"])
        c.put_header(2, 1.0, "float32")
        with pytest.raises(ValueError, match="3 channels, the header 2"):
            c.put_data(np.zeros((1, 3), np.float32))
        with pytest.raises(ValueError, match="2-D"):
            c.put_data(np.zeros((1, 2, 2), np.float32))
        with pytest.raises(ValueError, match="allowed: header, data, events"):
            c.flush("everything")
        with pytest.raises(TypeError, match="event 0"):
            c.put_events([object()])
        assert c.poll() == (0, 0)  # nothing reached the server
    with pytest.raises(ConnectionError, match="cannot connect"):
        Client.open("127.0.0.1:1")


def test_the_server_logs_each_refusal(ft_server: Any) -> None:
    with Client.open(ft_server.address) as c:
        with pytest.raises(FieldTripError):
            c.get_data(0, 0)
    log = ft_server.stop()
    assert "GET_DAT refused (GET_ERR)" in log
