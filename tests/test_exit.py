"""Interpreter exit with rtloop calls still in progress: a Python process whose daemon
threads are blocked in rtloop calls, or that ends with a FieldTrip server, a client and a
reader still open, exits with status 0 and prints no Rust panic or abort."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Callable

import pytest

import rtloop

RUNS = 3

# A daemon thread runs `BLOCK` (a call that blocks for a minute or more); the main thread
# waits until the thread is about to call it, gives it time to get inside, and exits.
SCRIPT = """
import sys, threading, time
import numpy as np
import rtloop
from rtloop.fieldtrip import Client, Server

name = sys.argv[1]
{setup}
started = threading.Event()

def run():
    started.set()
    {block}

threading.Thread(target=run, daemon=True).start()
started.wait()
time.sleep(0.3)
print("exiting", flush=True)
"""

STREAM = """
s = rtloop.Stream.create(name, n_channels=2, capacity=64)
w = s.writer(timeout=600)
r = s.reader("lossless")
"""

FIELDTRIP = """
srv = Server(name, bind="127.0.0.1:0")
c = Client.open(srv.address)
c.put_header(2, 100.0, "float32")
"""

CASES = {
    "pull_chunk": (STREAM, "r.pull_chunk(timeout=600)"),
    "wait": (STREAM, "r.wait(10**6, timeout=600)"),
    "iteration": (STREAM, "for _ in r: pass"),
    # the first chunk fills the stream, the second waits for the lossless reader that never reads
    "push_chunk": (STREAM, "full = np.zeros((s.capacity, 2), np.float32); w.push_chunk(full); w.push_chunk(full)"),
    # the client waits in WAIT_DAT; the in-process server's connection thread waits in the buffer
    "fieldtrip_wait": (FIELDTRIP, "c.wait(10**6, 10**6, 600_000)"),
}


def run_child(code: str, name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), name],
        capture_output=True,
        text=True,
        timeout=90,
    )


def assert_clean_exit(p: subprocess.CompletedProcess[str]) -> None:
    assert "FATAL" not in p.stderr and "panicked" not in p.stderr, p.stderr
    assert p.returncode == 0, f"exit status {p.returncode}; stderr: {p.stderr}"
    assert "exiting" in p.stdout


@pytest.mark.parametrize("case", sorted(CASES))
def test_exit_with_a_daemon_thread_blocked_in_a_call(case: str, make_name: Callable[[], str]) -> None:
    setup, block = CASES[case]
    for _ in range(RUNS):
        name = make_name()
        p = run_child(SCRIPT.format(setup=setup, block=block), name)
        assert_clean_exit(p)
        # a FieldTrip server still running at exit is stopped, and its stream removed
        if case.startswith("fieldtrip"):
            assert name not in rtloop.Stream.list()


def test_exit_with_a_daemon_thread_reading_a_stream_that_is_written(make_name: Callable[[], str]) -> None:
    """The display-thread pattern: the thread goes back into Python many times a second, so
    at exit it is often on its way back in."""
    code = """
    import sys, threading, time
    import numpy as np
    import rtloop

    s = rtloop.Stream.create(sys.argv[1], n_channels=2, capacity=4096)
    w = s.writer()
    r = s.reader()
    got = threading.Event()

    def show():
        for _ in r:
            got.set()

    def write():
        while True:
            w.push_chunk(np.zeros((4, 2), np.float32))
            time.sleep(0.001)

    threading.Thread(target=show, daemon=True).start()
    threading.Thread(target=write, daemon=True).start()
    got.wait()
    time.sleep(0.2)
    print("exiting", flush=True)
    """
    for _ in range(RUNS):
        assert_clean_exit(run_child(code, make_name()))


def test_exit_with_a_server_a_client_and_a_reader_open(make_name: Callable[[], str]) -> None:
    code = """
    import sys
    import numpy as np
    import rtloop
    from rtloop.fieldtrip import Client, Server

    name = sys.argv[1]
    srv = Server(name, bind="127.0.0.1:0")
    c = Client.open(srv.address)
    c.put_header(2, 100.0, "float32")
    c.put_data(np.ones((10, 2), np.float32))
    r = rtloop.Stream.open(name).reader(start="oldest")
    assert r.pull_chunk()[0].shape == (10, 2)
    print("exiting", flush=True)
    """
    for _ in range(RUNS + 2):
        name = make_name()
        p = run_child(code, name)
        assert_clean_exit(p)
        assert "not initialized" not in p.stderr, p.stderr
        assert name not in rtloop.Stream.list()
