"""Reading recordings made by `rtloop record` (one directory per stream).

>>> rec = rtloop.load("out/eeg")           # or rtloop.load("out") if it holds one stream
>>> rec.data.shape                          # numpy.memmap (samples, channels), no copy
>>> rec.timestamps                          # CLOCK_MONOTONIC seconds of each sample
>>> rec.events, rec.header["ch_names"]

The sample count comes from the file sizes, so a recording cut by kill -9 or a power loss loads
up to its last whole sample; ``rec.complete`` says whether it ended cleanly. The data file is
flat little-endian sample-major, so this also works without rtloop:
``numpy.memmap("out/eeg/data.bin", dtype=header["dtype"]).reshape(-1, header["n_channels"])``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import numpy as np
from numpy.typing import NDArray

__all__ = ["Recording", "Recorder", "load", "record"]

FORMAT = "rtloop-recording"


@dataclass
class Recording:
    """A recording opened for reading."""

    path: Path
    header: Dict[str, Any]
    data: NDArray[Any]
    timestamps: NDArray[np.float64]
    events: List[Dict[str, Any]]

    @property
    def complete(self) -> bool:
        """It ended cleanly (False: it was cut, or is still being written)."""
        return bool(self.header.get("complete"))

    @property
    def sfreq(self) -> float:
        return float(self.header["sfreq"])

    @property
    def ch_names(self) -> List[str]:
        return list(self.header["ch_names"])

    def __repr__(self) -> str:
        return (
            f"<rtloop.Recording {self.header['stream']!r}: {self.data.shape[0]} samples x "
            f"{self.data.shape[1]} {self.header['dtype']}, {len(self.events)} events"
            f"{'' if self.complete else ', cut short'}>"
        )


def load(path: Union[str, os.PathLike[str]]) -> Recording:
    """Open a recording directory (``OUT/STREAM``, or ``OUT`` when it holds exactly one)."""
    p = Path(path)
    if not (p / "header.json").exists():
        subs = [d for d in p.iterdir() if (d / "header.json").exists()] if p.is_dir() else []
        if len(subs) != 1:
            found = ", ".join(d.name for d in subs) or "none"
            raise FileNotFoundError(f"{p} is not an rtloop recording (no header.json); recordings inside: {found}")
        p = subs[0]
    try:
        header = json.loads((p / "header.json").read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{p / 'header.json'} is damaged: {e}") from e
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{p / 'header.json'} is not an rtloop recording header (format {header.get('format') if isinstance(header, dict) else None!r})")
    dtype = np.dtype(header["dtype"]).newbyteorder("<")
    nch = int(header["n_channels"])
    data_bytes = (p / "data.bin").stat().st_size
    stamp_bytes = (p / "timestamps.bin").stat().st_size
    n = min(data_bytes // (dtype.itemsize * nch), stamp_bytes // 8)
    data: NDArray[Any] = (
        np.memmap(p / "data.bin", dtype=dtype, mode="r", shape=(n, nch)) if n else np.zeros((0, nch), dtype)
    )
    stamps = (
        np.memmap(p / "timestamps.bin", dtype="<u8", mode="r", shape=(n,)) if n else np.zeros(0, "<u8")
    )
    events: List[Dict[str, Any]] = []
    ev = p / "events.jsonl"
    if ev.exists():
        for line in ev.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a line cut by a crash: everything before it is whole
    return Recording(p, header, data, np.asarray(stamps, dtype=np.float64) * 1e-9, events)


class Recorder:
    """A running `rtloop record` (its own process, so Python never slows it down).
    ``stop()`` ends it cleanly and returns its report, one dict per stream."""

    def __init__(self, streams: List[str], out: Union[str, "os.PathLike[str]"], seconds: Optional[float] = None) -> None:
        import subprocess
        import sys

        if isinstance(streams, str):
            streams = [streams]
        cmd = [sys.executable, "-m", "rtloop", "--json", "record", *streams, "--out", str(out)]
        if seconds is not None:
            cmd += ["--seconds", str(seconds)]
        env = dict(os.environ, RTLOOP_PYTHON=sys.executable)
        self.out = Path(out)
        self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        # started once every stream's header exists (its reader is registered)
        import time

        t = time.monotonic()
        while not all((self.out / s / "header.json").exists() for s in streams):
            if self._proc.poll() is not None:
                _, err = self._proc.communicate()
                raise RuntimeError(f"rtloop record did not start: {err.strip()}")
            if time.monotonic() - t > 30:
                self._proc.kill()
                raise RuntimeError("rtloop record did not start within 30 s")
            time.sleep(0.01)

    @property
    def running(self) -> bool:
        return self._proc.poll() is None

    def stop(self, timeout: float = 30.0) -> List[Dict[str, Any]]:
        """Stop (SIGINT, as Ctrl-C) and return the per-stream reports."""
        import signal

        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
        out, err = self._proc.communicate(timeout=timeout)
        if self._proc.returncode != 0:
            raise RuntimeError(f"rtloop record failed: {err.strip()}")
        reports: List[Dict[str, Any]] = json.loads(out) if out.strip() else []
        return reports

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.running:
            self.stop()


def record(streams: Union[str, List[str]], out: Union[str, "os.PathLike[str]"], seconds: Optional[float] = None) -> Recorder:
    """Start recording ``streams`` into ``out`` (``out/<stream>/``); returns a `Recorder`
    whose ``stop()`` ends it. Use it as a context manager to stop on exit."""
    return Recorder([streams] if isinstance(streams, str) else list(streams), out, seconds)
