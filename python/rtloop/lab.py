"""The latency lab from Python: `rtloop lab loadtest` with your own function as the work done
on every block, so tuning includes the computation your closed loop will really do.

    >>> import numpy as np, rtloop.lab
    >>> def detect(block):                       # (frames, channels) uint16, one block's frames
    ...     x = block.astype(np.float32) - 32768
    ...     return int((x < -3000).sum())          # events found (optional)
    >>> r = rtloop.lab.loadtest(profile="2xnp2", read_size=2048, seconds=5, work=detect)
    >>> r["host"]["latency"]["p99_ns"], r["host"]["work"]["p50_ns"]

The device runs in its own process as with the command; the function runs in this process,
with the GIL, once per block, after the next read has been posted (as the tutorial's loop does).
An exception in it ends the run and is raised here.

`tune` sweeps ReadSize (or the rate) as ``rtloop lab tune`` does and returns the
recommendation.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Dict, Optional, Union

from . import _rtloop
from .reports import LoadtestReport, TuneReport

__all__ = ["loadtest", "tune", "PROFILES"]

#: the presets: (frames/s, 16-bit words per frame, 32-bit words back)
PROFILES = {"2xnp2": (60_000, 392, 100), "intan64": (30_000, 63, 100)}


def loadtest(
    profile: str = "2xnp2",
    read_size: int = 2048,
    seconds: float = 10.0,
    *,
    work: Callable[[Any], Any],
    transport: str = "stream",
    every: int = 100,
    warmup: float = 1.0,
    fps: Optional[int] = None,
    received_words: Optional[int] = None,
    fifo_bytes: Optional[int] = None,
    spin_us: Optional[int] = None,
    reference: bool = False,
    out: Optional[str] = None,
    publish: Optional[str] = None,
) -> LoadtestReport:
    """Run a load test with ``work(block)`` as the work step; returns the report, a
    `rtloop.reports.LoadtestReport` (fields as attributes, still a dict: the same report ``rtloop lab loadtest --json`` prints: both come from rtloop's lab
    library). Settings are checked as the command checks them.

    With ``reference=True`` the report also carries the bare cache-line ping-pong between the
    same two CPUs, measured before the run (``reference_pingpong``), and a bare loop measured
    after it and sampled as the loopbacks were (``reference_paced``, the reference for the
    run's p99 and p99.9): as many stamps over the measured seconds, made on schedule on the
    device's CPU, echoed on the host's, each timed as a whole loop, so a stall of either CPU
    weighs in it as it does in the run.

    With ``publish="PREFIX"``, every loopback's HubClockDelta (µs) and every PercentUsed
    reading go live into the streams ``PREFIX.latency`` and ``PREFIX.percent_used`` while the
    run goes on (``rtloop view`` shows them); they are removed when it ends.

    Raises
    ------
    ValueError
        A setting out of range (the message names the allowed range).
    RuntimeError
        The run ended early (a FIFO overflow, the device process ending).
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; allowed: {', '.join(PROFILES)}")
    if not callable(work):
        raise TypeError(f"work must be a function of one block, got {type(work).__name__}")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise ValueError(f"seconds must be a number > 0, got {seconds!r}")
    # the device process re-runs rtloop as `python -m rtloop`, with this interpreter
    os.environ.setdefault("RTLOOP_PYTHON", sys.executable)
    report = _rtloop.lab_loadtest(
        profile, int(read_size), float(seconds), float(warmup), transport, int(every),
        fps, received_words, fifo_bytes, spin_us, bool(reference),
        None if out is None else str(out), work, publish,
    )
    return LoadtestReport.of(report)


def tune(
    profile: str = "2xnp2",
    *,
    transport: str = "stream",
    every: int = 100,
    fps: Optional[int] = None,
    received_words: Optional[int] = None,
    fifo_bytes: Optional[int] = None,
    spin_us: Optional[int] = None,
    loopbacks: int = 10_000,
    max_seconds: float = 30.0,
    start: int = 16384,
    bisect: bool = False,
    margin: int = 1,
    rate_sweep: bool = False,
    read_size: Union[int, str] = 2048,
    quick: bool = False,
    out: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> TuneReport:
    """Find the smallest ReadSize the host keeps up with (``rtloop lab tune``): a load test
    per step, ReadSize halved from ``start`` down to the smallest a frame allows (``bisect``
    refines between the last stable and first unstable size), the recommendation keeping
    ``margin`` qualifying sizes below it. A step qualifies when it is stable, its device made
    its frames at its rate (within 2 %; a device that did not is "overloaded", and the sweep
    goes on past it) and its p99 is within 10x (the block's fill time + the p99 of the bare loop
    sampled the same way right after it); with none, ``recommended_read_size`` is None and
    ``no_recommendation`` says why. ``rate_sweep=True`` holds ``read_size`` and raises the
    rate instead, as liboni's onix-loadtest does. ``quick`` runs short steps. Returns a
    `rtloop.reports.TuneReport`; ``out`` also writes results.json and tune.png there.

    Raises ``ValueError`` for a setting out of range (naming what is allowed) and
    ``RuntimeError`` when a step cannot run."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; allowed: {', '.join(PROFILES)}")
    os.environ.setdefault("RTLOOP_PYTHON", sys.executable)
    config = {
        "loopbacks": int(loopbacks), "max_seconds": float(max_seconds), "start": int(start),
        "bisect": bool(bisect), "margin": int(margin), "rate_sweep": bool(rate_sweep),
        "read_size": str(read_size), "quick": bool(quick),
    }
    report = _rtloop.lab_tune(
        profile, transport, int(every), fps, received_words, fifo_bytes, spin_us,
        json.dumps(config), None if out is None else os.fspath(out),
    )
    return TuneReport.of(report)
