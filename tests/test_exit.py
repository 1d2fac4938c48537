"""Interpreter exit with rtloop calls still in progress: a Python process whose daemon
threads are blocked in rtloop calls, or that ends with a FieldTrip server, a client and a
reader still open, exits with status 0 and prints no Rust panic or abort."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List

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


# Threads busy in rtloop calls, not blocked: a writer pushing, readers copying windows and
# pulling in loops with no sleep. Each copy makes its array with numpy, which lets go of the
# GIL while it allocates; a thread inside a call at exit used to be ended there (most exits
# of this script aborted). The main thread exits after a delay that varies by round, so the
# exit meets the threads at different points of their calls.
BUSY = """
import sys, threading, time
import numpy as np
import rtloop

s = rtloop.Stream.create(sys.argv[1], n_channels=8, capacity=1 << 14)
w = s.writer()
w.push_chunk(np.zeros((1 << 14, 8), np.float32))
go = threading.Event()

def write():
    x = np.zeros((256, 8), np.float32)
    go.wait()
    while True:
        w.push_chunk(x)

def copy():
    r = s.reader("latest")
    go.wait()
    while True:
        n = r.written
        try:
            r.read(n - 2048, n)
        except rtloop.WindowError:
            pass

def pull():
    r = s.reader("latest")
    go.wait()
    while True:
        try:
            r.pull_chunk(max_samples=4096, timeout=0)
        except rtloop.OverrunError:
            pass

for f in (write, copy, copy, pull):
    threading.Thread(target=f, daemon=True).start()
go.set()
time.sleep(float(sys.argv[2]))
print("exiting", flush=True)
"""


# The threads' first rtloop calls are the process's first calls that hand numpy arrays to
# rtloop, and the main thread exits within a millisecond or so: the numpy parts that rtloop
# looked up at a thread's first such call (an import, with other threads waiting for it with
# the GIL released) were often being looked up when the interpreter was finalized.
FIRST = """
import sys, threading, time
import numpy as np
import rtloop

s = rtloop.Stream.create(sys.argv[1], n_channels=4, capacity=1024)
w = s.writer()
readers = [s.reader("latest") for _ in range(5)]
x = np.zeros((16, 4), np.float32)
go = threading.Barrier(7)

def write():
    go.wait()
    while True:
        w.push_chunk(x)

def read(r):
    go.wait()
    while True:
        try:
            r.pull_chunk(timeout=0)
        except rtloop.OverrunError:
            pass

threading.Thread(target=write, daemon=True).start()
for r in readers:
    threading.Thread(target=read, args=(r,), daemon=True).start()
go.wait()
time.sleep(float(sys.argv[2]))
print("exiting", flush=True)
"""


def run_rounds(script: str, names: List[str], delay: Callable[[int], float]) -> None:
    """Run `script` once per name, two at a time; every exit must be clean."""

    def one(i: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", script, names[i], f"{delay(i):.4f}"],
            capture_output=True,
            text=True,
            timeout=90,
        )

    # two at a time: the rounds are independent processes
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(one, range(len(names))))
    bad = [(i, p.returncode, p.stderr[-400:]) for i, p in enumerate(results) if p.returncode != 0]
    assert not bad, f"{len(bad)} of {len(names)} exits failed; first: {bad[0]}"
    for p in results:
        assert_clean_exit(p)


def rounds() -> int:
    """Rounds of a stress test (`RTLOOP_SOAK=1`: ten times as many)."""
    return 240 if os.environ.get("RTLOOP_SOAK") == "1" else 24


# the soak's ten times as many rounds take longer than the default limit on a loaded machine
@pytest.mark.timeout(1200)
def test_exit_with_daemon_threads_busy_in_calls(make_name: Callable[[], str]) -> None:
    run_rounds(BUSY, [make_name() for _ in range(rounds())], lambda i: (i % 10) * 0.01)


@pytest.mark.timeout(1200)
def test_exit_right_after_threads_made_their_first_calls(make_name: Callable[[], str]) -> None:
    run_rounds(FIRST, [make_name() for _ in range(rounds())], lambda i: (i % 10) * 0.0001)
