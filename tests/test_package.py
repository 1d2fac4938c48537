"""The package around the stream API: light import, console entry, checks, logging."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys

import pytest

import rtloop
from rtloop._checks import check_type, check_value, ensure_int, ensure_timeout


def test_import_is_light() -> None:
    # the console script imports the package first: it must not load numpy or the native
    # module, so `rtloop --help` starts at once
    code = (
        "import sys, rtloop, rtloop._cli; "
        "print('numpy' in sys.modules, 'rtloop._rtloop' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_lazy_exports() -> None:
    assert rtloop.Stream.__name__ == "Stream"
    assert issubclass(rtloop.OverrunError, rtloop.RtloopError)
    assert issubclass(rtloop.TooOldError, rtloop.WindowError)
    assert "Stream" in dir(rtloop)
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        rtloop.nope  # noqa: B018
    assert rtloop.__version__ == rtloop._rtloop.__version__


def test_python_m_rtloop_runs_the_command_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rtloop", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"rtloop {rtloop.__version__}"
    bad = subprocess.run(
        [sys.executable, "-m", "rtloop", "no-such-command"], capture_output=True, text=True
    )
    assert bad.returncode == 2
    assert "no-such-command" in bad.stderr


def test_python_m_rtloop_is_the_rtloop_executable_in_the_same_process() -> None:
    # `python -m rtloop` replaces itself with the package's executable: the same pid, so a
    # parent that started `python -m rtloop child ...` signals and waits for the child itself
    from rtloop._cli import executable

    p = subprocess.Popen(
        [sys.executable, "-m", "rtloop", "serve", "--bind", "127.0.0.1:0", "--stream", f"pkg-exec-{os.getpid()}"],
        stdout=subprocess.PIPE, text=True,
    )
    with p:
        try:
            assert p.stdout is not None and p.stdout.readline().startswith("listening tcp=")
            assert os.path.realpath(f"/proc/{p.pid}/exe") == str(executable())
            # Ctrl-C is the command's: the server stops cleanly
            p.send_signal(signal.SIGINT)
            assert p.wait(timeout=30) == 0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_local_clock_is_monotonic_seconds() -> None:
    a = rtloop.local_clock()
    b = rtloop.local_clock()
    assert 0 < a <= b
    assert abs(rtloop._rtloop.monotonic_ns() * 1e-9 - b) < 60


def test_check_messages() -> None:
    with pytest.raises(
        ValueError,
        match="Invalid value for the 'mode' parameter. Allowed values are 'latest' and "
        "'lossless', but got 'fast' instead.",
    ):
        check_value("fast", ("latest", "lossless"), "mode")
    with pytest.raises(
        TypeError, match="The 'n' parameter must be an instance of 'int' or 'str', but got 'float'"
    ):
        check_type(1.5, (int, str), "n")
    with pytest.raises(TypeError, match="must be an instance of 'int'"):
        check_type(True, int, "n")
    assert ensure_int(7, "n") == 7
    with pytest.raises(ValueError, match=r"integers from 1 to 2\*\*64 - 1, but got 0"):
        ensure_int(0, "n", minimum=1)
    with pytest.raises(ValueError, match=r"integers from 0 to 10, but got 11"):
        ensure_int(11, "n", minimum=0, maximum=10)
    assert ensure_timeout(None) is None
    assert ensure_timeout(2) == 2.0
    with pytest.raises(ValueError, match="None \\(wait forever\\)"):
        ensure_timeout(float("nan"))


def test_set_log_level() -> None:
    logger = logging.getLogger("rtloop")
    try:
        rtloop.set_log_level("debug")
        assert logger.level == logging.DEBUG
        rtloop.set_log_level(logging.ERROR)
        assert logger.level == logging.ERROR
        with pytest.raises(ValueError, match="'level' parameter"):
            rtloop.set_log_level("loud")
    finally:
        rtloop.set_log_level(None)


def test_rust_log_records_reach_python_logging(
    caplog: pytest.LogCaptureFixture, make_name
) -> None:
    name = make_name()
    s = rtloop.Stream.create(name, n_channels=1, capacity=1)
    r = s.reader()
    w = s.writer()
    import numpy as np

    w.push_chunk(np.zeros((s.capacity + 3, 1), dtype=np.float32))
    try:
        rtloop.set_log_level("debug")
        with caplog.at_level(logging.DEBUG, logger="rtloop"):
            with pytest.raises(rtloop.OverrunError):
                r.pull_chunk()
    finally:
        rtloop.set_log_level(None)
    overrun = [rec for rec in caplog.records if "reader overrun" in rec.getMessage()]
    assert overrun, [rec.getMessage() for rec in caplog.records]
    assert overrun[0].name.startswith("rtloop.rtloop_stream")
