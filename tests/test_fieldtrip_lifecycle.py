"""`rtloop.fieldtrip.Server` in this process: `stop()` closes every connection at once, and a
second server on the same stream is refused as a second `rtloop serve` is."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any, Callable, List

import numpy as np
import pytest

import rtloop
from rtloop.fieldtrip import Client, FieldTripError, Server

from conftest import terminate


def test_stop_closes_idle_connections(stream_name: str) -> None:
    srv = Server(stream_name, bind="127.0.0.1:0")
    a = Client.open(srv.address)
    b = Client.open(srv.address)
    a.put_header(2, 100.0, "float32")
    assert b.get_header().nChannels == 2
    assert srv.clients == 2
    srv.stop()
    # true right after stop: no connection is left, and none answers
    assert srv.clients == 0
    for c in (a, b):
        with pytest.raises(ConnectionError):
            c.get_header()
        assert not c.connected


def test_stop_ends_a_wait_dat_at_once(stream_name: str) -> None:
    srv = Server(stream_name, bind="127.0.0.1:0")
    c = Client.open(srv.address)
    c.put_header(2, 100.0, "float32")
    outcome: List[Any] = []
    waiting = threading.Event()

    def wait() -> None:
        waiting.set()
        try:
            # ten minutes: far beyond the join below, so only a stop that ends it passes
            outcome.append(c.wait(1000, 1000, 600_000))
        except Exception as e:  # noqa: BLE001 - the test looks at what it was
            outcome.append(e)

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    waiting.wait()
    time.sleep(0.3)  # time for the request to go out (stop ends the wait either way)
    assert srv.clients == 1
    srv.stop()
    t.join(60)
    assert not t.is_alive(), "WAIT_DAT went on after stop()"
    assert len(outcome) == 1 and isinstance(outcome[0], ConnectionError), outcome
    assert srv.clients == 0


def test_clients_counts_during_stop(stream_name: str) -> None:
    """`clients` answers (and is true) from another thread while `stop()` runs."""
    srv = Server(stream_name, bind="127.0.0.1:0")
    conns = [Client.open(srv.address) for _ in range(3)]
    conns[0].put_header(1, 10.0, "float32")
    for c in conns:
        c.get_header()
    assert srv.clients == 3
    seen: List[int] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.append(srv.clients)

    t = threading.Thread(target=watch)
    t.start()
    srv.stop()
    done.set()
    t.join()
    assert srv.clients == 0
    assert all(0 <= n <= 3 for n in seen)
    for c in conns:
        with pytest.raises(ConnectionError):
            c.get_header()


def test_a_second_server_on_the_same_stream_is_refused(make_name: Callable[[], str]) -> None:
    name = make_name()
    with Server(name, bind="127.0.0.1:0") as first, Server(name, bind="127.0.0.1:0") as second:
        a = Client.open(first.address)
        a.put_header(2, 100.0, "float32")
        a.put_data(np.ones((5, 2), np.float32))
        b = Client.open(second.address)
        # (the reason, "being written by another writer in this process", is in the log:
        # FieldTrip's error replies carry no text)
        with pytest.raises(FieldTripError, match="PUT_HDR refused"):
            b.put_header(2, 100.0, "float32")
        # the first server still writes into the stream readers open by its name
        a.put_data(np.ones((5, 2), np.float32))
        assert rtloop.Stream.open(name).written == 10
        assert a.get_header().nSamples == 10
        a.close()
        b.close()
    assert name not in rtloop.Stream.list()


def test_a_second_serve_process_is_refused_without_asking_first(make_name: Callable[[], str]) -> None:
    """The second server's first request is its PUT_HDR (it never looked at the stream)."""
    name = make_name()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "rtloop", "serve", "--stream", name, "--bind", "127.0.0.1:0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        addrs = []
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()  # "listening tcp=HOST:PORT unix=- stream=NAME"
            addrs.append(line.split()[1].removeprefix("tcp="))
        a = Client.open(addrs[0])
        a.put_header(2, 100.0, "float32")
        b = Client.open(addrs[1])
        with pytest.raises(FieldTripError, match="PUT_HDR refused"):
            b.put_header(2, 100.0, "float32")
        a.put_data(np.ones((5, 2), np.float32))
        assert rtloop.Stream.open(name).written == 5
        a.close()
        b.close()
    finally:
        errs = [terminate(p) for p in procs]
    assert f"is being written by local process {procs[0].pid}" in errs[1], errs[1]


def test_a_server_takes_a_stream_back_after_the_other_stopped(make_name: Callable[[], str]) -> None:
    """Refused only while the other writer lives: once the first server stopped, the second
    one's PUT_HDR makes the stream."""
    name = make_name()
    first = Server(name, bind="127.0.0.1:0", keep=True)
    second = Server(name, bind="127.0.0.1:0")
    try:
        a = Client.open(first.address)
        a.put_header(2, 100.0, "float32")
        first.stop()
        b = Client.open(second.address)
        b.put_header(3, 50.0, "float32")
        assert rtloop.Stream.open(name).n_channels == 3
        b.close()
    finally:
        first.stop()
        second.stop()
