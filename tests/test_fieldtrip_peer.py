"""A real peer: FieldTrip's own Python client (FieldTrip.py as shipped in the eegsynth wheel on
PyPI, installed by scripts/python-dev.sh) against `rtloop serve`, unchanged.

FieldTrip.py is the client MNE, eegsynth and many lab scripts use; if it works against rtloop,
so do they. Two of its own bugs are worked around without changing it: it serialises arrays
with `ndarray.tostring()`, which numpy 2 removed, so the arrays given to `putData` are a
subclass that still has that method (`_old`); and its `putEvents` cannot run on Python 3 (it
packs a float element count), so events reach the server through another client here and
FieldTrip.py reads them.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Iterator, Tuple

import numpy as np
import pytest

import rtloop
from _peers import need

# the peer client: FieldTrip.py from `pip install --no-deps eegsynth` (scripts/python-dev.sh)
FieldTrip: Any = need("lib.FieldTrip", "eegsynth")


class _OldNumpy(np.ndarray):
    """An array with numpy 1's `tostring` (FieldTrip.py still calls it)."""

    def tostring(self) -> bytes:
        return self.tobytes()


def _old(a: np.ndarray) -> Any:
    return np.ascontiguousarray(a).view(_OldNumpy)


@pytest.fixture
def server(ft_server: Any) -> Iterator[Tuple[str, int, str]]:
    """(host, port, stream) of a running `rtloop serve`."""
    yield ft_server.host, ft_server.port, ft_server.stream


def _connect(host: str, port: int) -> Any:
    c = FieldTrip.Client()
    c.connect(host, port)
    return c


def test_fieldtrip_py_header_data_and_polling(server: Tuple[str, int, str]) -> None:
    host, port, name = server
    ft = _connect(host, port)
    try:
        assert ft.getHeader() is None  # GET_ERR before any header, as from the reference
        ft.putHeader(4, 512.0, FieldTrip.DATATYPE_FLOAT32, labels=["Fz", "Cz", "Pz", "Oz"])
        h = ft.getHeader()
        assert (h.nChannels, h.nSamples, h.nEvents, h.fSample, h.dataType) == (4, 0, 0, 512.0, 9)
        assert h.labels == ["Fz", "Cz", "Pz", "Oz"]

        x = np.arange(40, dtype=np.float32).reshape(10, 4)
        ft.putData(_old(x))
        ft.putData(_old(x + 100))
        np.testing.assert_array_equal(ft.getData([0, 9]), x)
        np.testing.assert_array_equal(ft.getData([10, 19]), x + 100)
        np.testing.assert_array_equal(ft.getData(), np.vstack([x, x + 100]))
        assert ft.getData([15, 25]) is None  # beyond the newest: GET_ERR
        assert ft.poll() == (20, 0)

        # what FieldTrip.py wrote is an rtloop stream, readable zero-copy
        s = rtloop.Stream.open(name)
        assert s.ch_names == ["Fz", "Cz", "Pz", "Oz"]
        r = s.reader(mode="latest")
        np.testing.assert_array_equal(r.window(0, 20), np.vstack([x, x + 100]))
        r.close()


        # int16 after a new header: counts restart
        ft.putHeader(2, 1000.0, FieldTrip.DATATYPE_INT16)
        assert ft.poll() == (0, 0)
        y = np.array([[1, -1], [2, -2], [3, -3]], dtype=np.int16)
        ft.putData(_old(y))
        np.testing.assert_array_equal(ft.getData([1, 2]), y[1:])
    finally:
        ft.disconnect()


def test_fieldtrip_py_wait_is_woken_by_data(server: Tuple[str, int, str]) -> None:
    host, port, _ = server
    ft = _connect(host, port)
    writer = _connect(host, port)
    try:
        ft.putHeader(1, 100.0, FieldTrip.DATATYPE_FLOAT64)

        def put_later() -> None:
            time.sleep(0.2)
            writer.putData(_old(np.ones((5, 1))))

        t = threading.Thread(target=put_later)
        t.start()
        t0 = time.monotonic()
        assert ft.wait(0, 0, 10_000) == (5, 0)
        elapsed = time.monotonic() - t0
        t.join()
        assert elapsed < 5.0, f"WAIT_DAT returned after {elapsed:.2f} s, not when the data came"
        # a timeout returns the counts
        assert ft.wait(100, 100, 100) == (5, 0)
    finally:
        ft.disconnect()
        writer.disconnect()


def test_fieldtrip_py_reads_events_stored_by_another_client(server: Tuple[str, int, str]) -> None:
    host, port, name = server
    ft = _connect(host, port)
    try:
        ft.putHeader(2, 250.0, FieldTrip.DATATYPE_FLOAT32)
        ft.putData(_old(np.zeros((30, 2), dtype=np.float32)))
        # two events over the raw protocol: text "trigger"/"go" at 7, and "level" = [1.5, -2.0]
        import socket
        import struct

        def event(t: bytes, tt: int, v: bytes, vt: int, vn: int, sample: int) -> bytes:
            return struct.pack("<IIIIiiiI", tt, len(t), vt, vn, sample, 0, 3, len(t) + len(v)) + t + v

        payload = event(b"trigger", 0, b"go", 0, 2, 7) + event(
            b"level", 0, struct.pack("<dd", 1.5, -2.0), 10, 2, 20
        )
        with socket.create_connection((host, port)) as s:
            s.sendall(struct.pack("<HHI", 1, 0x0103, len(payload)) + payload)
            assert s.recv(8) == struct.pack("<HHI", 1, 0x0104, 0)
        evs = ft.getEvents()
        assert len(evs) == 2
        assert (evs[0].type, evs[0].value, evs[0].sample, evs[0].duration) == (b"trigger", b"go", 7, 3)
        assert evs[1].type == b"level"
        np.testing.assert_array_equal(evs[1].value, [1.5, -2.0])
        assert [e.sample for e in ft.getEvents([1, 1])] == [20]
        assert ft.poll() == (30, 2)
        # local readers see them in the stream's event ring
        s = rtloop.Stream.open(name)
        r = s.reader(mode="latest")
        assert [e.sample for e in r.read_events(0, 2)] == [7, 20]
        r.close()

    finally:
        ft.disconnect()


def test_fieldtrip_py_reads_long_and_latin1_events_byte_for_byte(server: Tuple[str, int, str]) -> None:
    """Events the reference stores and rtloop used to refuse: a 3000-byte text value and
    Latin-1 text, sent as raw PUT_EVT bytes and read back by FieldTrip.py unchanged."""
    host, port, name = server
    ft = _connect(host, port)
    try:
        ft.putHeader(1, 100.0, FieldTrip.DATATYPE_FLOAT32)
        import socket
        import struct

        def event(t: bytes, v: bytes, sample: int) -> bytes:
            return struct.pack("<IIIIiiiI", 0, len(t), 0, len(v), sample, 0, 0, len(t) + len(v)) + t + v

        long_value = b"L" * 3000
        latin1 = b"stimulus caf\xe9"
        payload = event(b"note", long_value, 1) + event(latin1, b"\xe9t\xe9", 2)
        with socket.create_connection((host, port)) as s:
            s.sendall(struct.pack("<HHI", 1, 0x0103, len(payload)) + payload)
            assert s.recv(8) == struct.pack("<HHI", 1, 0x0104, 0)
        evs = ft.getEvents()
        assert [(e.type, e.value, e.sample) for e in evs] == [
            (b"note", long_value, 1),
            (latin1, b"\xe9t\xe9", 2),
        ]
    finally:
        ft.disconnect()
