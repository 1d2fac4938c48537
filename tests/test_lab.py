"""`rtloop.lab.loadtest` with a Python function as the work step (the device is a real process)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any, List

import numpy as np
import pytest

import rtloop
import rtloop.lab
import rtloop.reports


def test_a_python_function_is_the_work_step() -> None:
    shapes: List[Any] = []

    def detect(block: np.ndarray) -> int:
        shapes.append((block.shape, block.dtype))
        x = block.astype(np.float32) - 32768.0
        return int((x < 0).sum() > 0)

    r = rtloop.lab.loadtest("intan64", read_size=1024, seconds=1.0, warmup=0.2, every=10, work=detect,
                            reference=True)
    # a typed report: the Python class names exactly the fields the lab library gives
    rtloop.reports.LoadtestReport.check(r)
    assert isinstance(r, rtloop.reports.LoadtestReport) and r.host is r["host"]
    assert r.host.latency.count == r["host"]["latency"]["count"]
    h = r["host"]
    assert r["device"]["ended"] == "stopped"
    # how many loopbacks and blocks a second gets depends on the machine's load; that the
    # function ran once per block and saw every frame does not
    assert h["latency"]["count"] > 0
    assert h["work"]["count"] == h["blocks"], "the function ran once per block"
    assert h["work_events"] > 0
    # the verdict follows the rate the device made: overloaded, with the numbers, exactly when
    # it made less than 98 % of its frames over the measured window
    d = r.device
    assert d.seconds_measured > 0
    if d.fps_measured < 0.98 * d.fps_configured:
        assert r.verdict == "overloaded", r.verdict_notes
        assert r.verdict_notes.startswith(
            f"the device made {d.fps_measured:.0f} of {d.fps_configured:.0f} frames/s"), r.verdict_notes
    else:
        assert r.verdict != "overloaded", r.verdict_notes
    # the tails' reference samples as the run did: one round trip per loopback measured
    assert r.reference_paced is not None and r.reference_paced.count == h["latency"]["count"]
    assert r.host.preempted is not None and r.host.preempted >= 0
    # each block holds whole frames of 63 channels of uint16
    assert all(s[1] == np.uint16 and s[0][1] == 63 for s in shapes)
    assert sum(s[0][0] for s in shapes) == h["frames"] > 0


def test_an_exception_in_the_work_ends_the_run_and_is_raised() -> None:
    def broken(block: np.ndarray) -> int:
        raise ZeroDivisionError("the detector divided by zero")

    with pytest.raises(ZeroDivisionError, match="divided by zero"):
        rtloop.lab.loadtest("intan64", read_size=1024, seconds=1.0, warmup=0.1, work=broken)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="allowed: 2xnp2, intan64"):
        rtloop.lab.loadtest("np9", work=lambda b: 0)
    with pytest.raises(ValueError, match="requires at least 816 bytes"):
        rtloop.lab.loadtest("2xnp2", read_size=100, work=lambda b: 0)
    with pytest.raises(ValueError, match='unknown transport "pigeon"; allowed: stream, unix, tcp, fieldtrip'):
        rtloop.lab.loadtest("2xnp2", transport="pigeon", work=lambda b: 0)
    with pytest.raises(ValueError, match="seconds must be a number > 0"):
        rtloop.lab.loadtest("2xnp2", seconds=0, work=lambda b: 0)
    with pytest.raises(TypeError, match="function of one block"):
        rtloop.lab.loadtest("2xnp2", work=42)  # type: ignore[arg-type]


def test_ctrl_c_ends_a_load_test_with_its_report_and_removes_its_streams() -> None:
    prefix = f"labint-{os.getpid()}"
    before = set(rtloop.Stream.list())
    p = subprocess.Popen(
        [sys.executable, "-m", "rtloop", "--json", "lab", "loadtest", "--seconds", "60", "--warmup", "0.2",
         "--no-reference", "--publish", prefix],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while f"{prefix}.latency" not in rtloop.Stream.list():
            assert time.monotonic() < deadline and p.poll() is None, p.communicate()
            time.sleep(0.1)
        time.sleep(1.0)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, err
    report = json.loads(out)
    assert report["host"]["seconds"] < 30, "it ended at the signal, not at --seconds"
    left = set(rtloop.Stream.list()) - before
    assert not left, f"left behind: {sorted(left)}"


def test_tune_from_python_is_the_commands_sweep(tmp_path: Any) -> None:
    """`rtloop.lab.tune` runs the sweep `rtloop lab tune` runs (the lab library's `tune`):
    ReadSize halved from `start` to the smallest a frame allows, each step measured, and a
    recommendation; `out` writes results.json and tune.png as the command does."""
    r = rtloop.lab.tune("intan64", start=2048, loopbacks=100, max_seconds=1.0, out=tmp_path)
    rtloop.reports.TuneReport.check(r)
    assert r.sweep == "read size" and r.load.fps == 30_000
    sizes = [s["read_size"] for s in r.steps]
    assert sizes[0] == 2048 and sizes == sorted(sizes, reverse=True)
    assert all(s["class"] for s in r.steps)
    assert json.loads((tmp_path / "results.json").read_text())["steps"] == json.loads(json.dumps(r.steps))
    assert (tmp_path / "tune.png").stat().st_size > 0


def test_tune_refuses_bad_settings_saying_what_is_allowed() -> None:
    with pytest.raises(ValueError, match="allowed: 2xnp2, intan64"):
        rtloop.lab.tune("np9")
    with pytest.raises(ValueError, match="max seconds 0 per step: a number of seconds > 0"):
        rtloop.lab.tune("intan64", max_seconds=0)
    with pytest.raises(ValueError, match='unknown transport "pigeon"'):
        rtloop.lab.tune("intan64", transport="pigeon")
    with pytest.raises(ValueError, match='ReadSize "big" is not a number of bytes'):
        rtloop.lab.tune("intan64", rate_sweep=True, read_size="big")
