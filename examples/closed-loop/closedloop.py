"""What the closed-loop examples share: write the input file, replay it into a stream, run the
model with `rtloop run`, listen to its triggers on a real UDP socket, and afterwards measure
what happened against the truth the input was made from.

Measured, not assumed:

* which file sample each model sample was: the model logs what `stream_in` took from the
  stream (every new sample, in order) and what the jitter buffer gave the blocks, and each
  tick's rows are found in the file by their values;
* the tick each sample entered the model in: the tick whose `stream_in` rows held it;
* the tick a trigger left in: the listener stamps each datagram with the kernel's receive
  time (SO_TIMESTAMPNS) and finds the tick that had started by then in the log's `ticks`
  table (the timer's start of each tick).
* the tick whose rows held an event's sample: the event's `sample` (its index in the block's
  input stream, which begins with the signal's history of zero ticks) divided by the rows per
  tick gives the tick the blocks got it in; that tick's rows, found in the file, give the
  file sample, and so the tick it entered the model in.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

import rtloop

# Linux's SO_TIMESTAMPNS (asm-generic/socket.h), which Python's socket module does not name
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def rtloop_exe() -> str:
    """The `rtloop` command installed beside this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / "rtloop"
    exe = os.environ.get("RTLOOP_BIN") or (str(beside) if beside.exists() else shutil.which("rtloop"))
    if exe is None:
        sys.exit("the rtloop command is not on PATH: pip install rtloop")
    return exe


def child_env() -> Dict[str, str]:
    """The environment of `rtloop replay` and `rtloop run`: their Python (NWB files are read
    with pynwb, modules run in it) is this script's unless RTLOOP_PYTHON says otherwise."""
    return dict(os.environ, RTLOOP_PYTHON=os.environ.get("RTLOOP_PYTHON", sys.executable))


def arguments(description: str, seconds: float) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--seconds", type=float, default=seconds, help=f"how long the model runs (default {seconds})")
    p.add_argument("--out", type=Path, default=None, help="output directory (default out/<model name>)")
    p.add_argument("--tag", default="", help="appended to the model's and streams' names (several runs at once)")
    p.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    return p.parse_args()


def realtime() -> None:
    """Run the replay at SCHED_FIFO priority 90 when permitted, above the model's (80, its
    timer 81): it stands in for the acquisition, whose hardware never waits for the host. It
    sleeps between its blocks of a millisecond and takes a few per cent of a core, so the
    model loses little to it; below the model, a busy machine held it back for tens of
    milliseconds at a time and the model waited for samples. Without the permission it runs
    as it is."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(90))
    except (PermissionError, OSError):
        pass


class Example:
    """One example's run: its model file (copied with the names and the trigger port of this
    run), its output directory, the replay and the listener."""

    def __init__(self, folder: Path, name: str, args: argparse.Namespace):
        self.folder = folder
        self.args = args
        self.name = name + (f"-{args.tag}" if args.tag else "")
        self.out = (args.out or Path("out") / self.name).resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self.base = name
        self.replay_proc: Optional[subprocess.Popen[str]] = None
        self.figures: Dict[str, Any] = {}

    # ------------------------------------------------------------ running

    def model(self, port: Optional[int] = None) -> Path:
        """The example's model.yaml with this run's names (and trigger port), in the output
        directory; code files are found beside the original."""
        text = (self.folder / "model.yaml").read_text()
        text = text.replace(self.base, self.name)
        if port is not None:
            assert "127.0.0.1:47000" in text, "the model's udp_out sends to 127.0.0.1:47000"
            text = text.replace("127.0.0.1:47000", f"127.0.0.1:{port}")
        # module code is relative to the model file: point it back at the example's folder
        text = text.replace("code: ", f"code: {self.folder}/")
        path = self.out / "model.yaml"
        path.write_text(text)
        return path

    def replay(self, path: Path, stream: str, *extra: str) -> str:
        """Start `rtloop replay PATH --stream NAME` at the file's own pace; return once the
        stream exists."""
        stream = stream.replace(self.base, self.name)
        cmd = [rtloop_exe(), "replay", str(path), "--stream", stream, *extra]
        print("$", " ".join(cmd[1:]))
        self.replay_proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), preexec_fn=realtime
        )
        deadline = time.monotonic() + 60
        while stream not in rtloop.Stream.list():
            if self.replay_proc.poll() is not None:
                sys.exit(f"rtloop replay failed: {self.replay_proc.stderr.read() if self.replay_proc.stderr else ''}")
            if time.monotonic() > deadline:
                self.stop_replay()
                sys.exit(f"rtloop replay did not create stream {stream} within 60 s")
            time.sleep(0.05)
        return stream

    def stop_replay(self) -> None:
        p = self.replay_proc
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
        self.replay_proc = None

    def start(self, model: Path) -> "subprocess.Popen[str]":
        """Start `rtloop run MODEL --seconds S --out DIR --json --quiet` and return once the
        model runs (its signals' streams exist). rtloop refuses a tick the machine cannot hold
        at that moment (it measures before it starts); then this says so and tries again, up
        to three times, as a user would."""
        cmd = [rtloop_exe(), "run", str(model), "--seconds", str(self.args.seconds), "--out", str(self.out), "--json", "--quiet"]
        print("$", " ".join(cmd[1:]))
        for attempt in range(1, 4):
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
            while p.poll() is None and not any(s.startswith(f"{self.name}.") for s in rtloop.Stream.list()):
                time.sleep(0.02)
            if p.poll() is None or p.returncode == 0:
                return p
            out, err = p.communicate()
            if "below what this machine can schedule" in err and attempt < 3:
                print(f"the machine is too loaded for the model's tick just now ({err.strip().splitlines()[-1]}); trying again in 2 s")
                time.sleep(2)
                continue
            self.stop_replay()
            sys.exit(f"rtloop run failed ({p.returncode}):\n{err}\n{out}")
        raise AssertionError("unreachable")

    def wait(self, p: "subprocess.Popen[str]") -> Dict[str, Any]:
        """Wait for the model to end; stop the replay; the run's report."""
        try:
            out, err = p.communicate(timeout=self.args.seconds + 180)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
            self.stop_replay()
        if p.returncode != 0:
            sys.exit(f"rtloop run failed ({p.returncode}):\n{err}\n{out}")
        report: Dict[str, Any] = json.loads(out)
        print(f"jitter buffer: {summary_of(report, 'buffer')}")
        return report

    def run(self, model: Path) -> Dict[str, Any]:
        return self.wait(self.start(model))

    def log(self) -> "rtloop.log.Log":
        return rtloop.load_log(self.out / "loop.db")

    def finish(self) -> None:
        if self.args.json is not None:
            self.args.json.write_text(json.dumps(self.figures, indent=2))


class Listener:
    """A UDP socket the model's `udp_out` sends its triggers to; each datagram is kept with
    the kernel's receive time (CLOCK_REALTIME, ns)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port: int = self.sock.getsockname()[1]
        self.received: List[Tuple[int, bytes]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                data, anc, _, _ = self.sock.recvmsg(2048, socket.CMSG_SPACE(16))
            except socket.timeout:
                continue
            stamp = time.time_ns()
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("qq", payload[:16])
                    stamp = sec * 1_000_000_000 + nsec
            self.received.append((stamp, data))

    def close(self) -> List[Tuple[int, bytes]]:
        time.sleep(0.2)
        self._stop.set()
        self._thread.join()
        self.sock.close()
        return self.received

    def events(self) -> Tuple[np.ndarray, np.ndarray]:
        """The triggers received: receive times (ns) and their rows [channel, sample, value]."""
        stamps = np.array([s for s, _ in self.received], dtype=np.int64)
        rows = np.array([np.frombuffer(d, dtype="<f8") for _, d in self.received]).reshape(-1, 3)
        return stamps, rows


# ------------------------------------------------------------ measuring


def row_index(source: np.ndarray, k: int) -> Dict[bytes, int]:
    """Each run of `k` consecutive rows of `source` (as bytes) -> the index one past its last
    row (the first such run, if a run occurs twice)."""
    src = np.ascontiguousarray(source.reshape(len(source), -1))
    width = src.shape[1] * src.itemsize
    buf = np.ascontiguousarray(np.hstack([src[i : len(src) - k + 1 + i] for i in range(k)])).tobytes()
    wk = k * width
    index: Dict[bytes, int] = {}
    for j in range(len(src) - k + 1):
        index.setdefault(buf[j * wk : (j + 1) * wk], j + k)
    return index


class Arrivals:
    """The tick each file sample entered the model in: `stream_in`'s variable signal, logged,
    holds every new sample of the stream in order, each tick's rows found in the file by
    their values. `-1` for samples that never arrived."""

    def __init__(self, ticks: np.ndarray, rows: np.ndarray, data: np.ndarray, source: np.ndarray):
        src = np.ascontiguousarray(source.astype(data.dtype, copy=False).reshape(len(source), -1))
        flat = data.reshape(len(data), -1)
        two = row_index(src, 2)
        self.tick = np.full(len(src), -1, dtype=np.int64)
        at, end = 0, -1
        for t, n in zip(ticks, rows):
            n = int(n)
            if n == 0:
                continue
            got = flat[at : at + n]
            at += n
            if 0 <= end and end + n <= len(src) and np.array_equal(src[end : end + n], got):
                e = end + n  # the samples after the last tick's, as a stream_in reads them
            elif n >= 2:
                e = two.get(np.ascontiguousarray(got[-2:]).tobytes(), -1)
            else:
                e = -1
            if e >= n:
                self.tick[e - n : e] = np.where(self.tick[e - n : e] < 0, t, self.tick[e - n : e])
                end = e
        self.arrived = int((self.tick >= 0).sum())

    def of(self, samples: np.ndarray) -> np.ndarray:
        return self.tick[np.asarray(samples, dtype=np.int64)]


class TickMap:
    """Which file samples each logged tick's rows were, found by their values.

    `logged`: the logged input signal, `(ticks, rows, channels)`; `source`: the file's samples
    `(samples, channels)` as the stream carried them. Each tick's newest two rows (its one row if
    it has only one) are looked up in the file (two rows: one row of a few int16 channels may
    occur twice)."""

    def __init__(self, ticks: np.ndarray, logged: np.ndarray, source: np.ndarray):
        rows = logged.shape[1]
        self.rows = rows
        k = min(2, rows)
        index = row_index(source.astype(logged.dtype, copy=False), k)
        flat = logged.reshape(len(logged), rows, -1)
        self.end: Dict[int, int] = {}
        for t, tick_rows in zip(ticks, flat):
            key = np.ascontiguousarray(tick_rows[-k:]).tobytes()
            e = index.get(key)
            if e is not None and e >= rows:
                self.end[int(t)] = e
        self.ticks = np.array(sorted(self.end), dtype=np.int64)
        ends = np.array([self.end[int(t)] for t in self.ticks], dtype=np.int64)
        steps = np.diff(ends)
        # a step of 0: the tick saw no new sample (it repeats the last tick's rows); more than
        # `rows`: the samples in between never reached the model
        self.repeated_ticks = int((steps == 0).sum())
        self.skipped_samples = int(np.clip(steps - rows, 0, None).sum())
        self.unmatched_ticks = len(ticks) - len(self.ticks)
        # the ticks whose rows follow the previous tick's without a gap: found in the file, the
        # tick before found too, and exactly `rows` samples on
        self.continuous = {int(t) for t, prev, step in zip(self.ticks[1:], self.ticks[:-1], steps)
                           if t == prev + 1 and step == rows}

    def settled(self, tick: int, settle: int) -> bool:
        """Whether `tick` and the `settle - 1` ticks before it all continued their predecessor:
        a filter that saw a jump in its input (a gap on a loaded machine, or a held sample)
        rings for a few ms, and what it detects then says nothing of the detector."""
        return all(int(tick) - k in self.continuous for k in range(settle))

    def file_sample(self, tick: int, row: int) -> Optional[int]:
        e = self.end.get(int(tick))
        return None if e is None else e - self.rows + row

    def seen(self, from_tick: int, settle: int = 0) -> np.ndarray:
        """Every file sample the model's rows held from tick `from_tick` on (sorted); with
        `settle`, only in ticks `settled` that long."""
        parts = [
            np.arange(self.end[int(t)] - self.rows, self.end[int(t)])
            for t in self.ticks
            if t >= from_tick and self.settled(t, settle)
        ]
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)

    def describe(self) -> str:
        n = len(self.ticks)
        return (
            f"blocks' input: {n} ticks found in the file ({self.unmatched_ticks} not found: they hold a "
            f"held sample), {self.repeated_ticks} ticks repeated the last tick's samples, "
            f"{self.skipped_samples} samples skipped"
        )


def event_ticks(samples: np.ndarray, rows: int, history: int = 1) -> np.ndarray:
    """The tick whose rows held each stream sample index (a stream begins with `history` ticks
    of zeros)."""
    return (samples.astype(np.int64) - history * rows) // rows


def received_ticks(stamps_ns: np.ndarray, log: "rtloop.log.Log", clock: str = "realtime") -> np.ndarray:
    """The tick that had started when each datagram arrived: the last tick whose start (the
    timer's, CLOCK_MONOTONIC, from the log's `ticks` table) came before it. Realtime stamps
    (SO_TIMESTAMPNS) are moved onto CLOCK_MONOTONIC by the offset between the two clocks the
    logger read at each tick."""
    starts = log.ticks["start_ns"]
    ticks = log.ticks["tick"]
    stamps = np.asarray(stamps_ns, dtype=np.int64)
    if clock == "realtime":
        offset = int(np.median(log.ticks["realtime_ns"] - log.ticks["monotonic_ns"]))
        stamps = stamps - offset
    i = np.searchsorted(starts, stamps, side="right") - 1
    return np.where(i >= 0, ticks[np.clip(i, 0, None)], -1)


def latency_histogram(lat: np.ndarray, what: str = "input-to-trigger latency", of: str = "triggers") -> Dict[str, Any]:
    """Print and return the histogram of latencies in ticks, with p50/p99."""
    lat = np.asarray(lat, dtype=np.int64)
    if len(lat) == 0:
        print(f"{what}: no {of}")
        return {"n": 0, "p50": None, "p99": None, "histogram": {}}
    values, counts = np.unique(lat, return_counts=True)
    p50 = float(np.percentile(lat, 50))
    p99 = float(np.percentile(lat, 99))
    print(f"{what} in ticks over {len(lat)} {of}: p50 {p50:g}, p99 {p99:g}, max {lat.max()}")
    # one line per tick count, or per range of them when they spread wide
    width = max(1, int(np.ceil((lat.max() - lat.min() + 1) / 12)))
    edges = np.arange(lat.min(), lat.max() + width + 1, width)
    binned, _ = np.histogram(lat, bins=edges)
    for lo, c in zip(edges[:-1], binned):
        if c == 0:
            continue
        label = f"{lo:5d}" if width == 1 else f"{lo:5d}-{lo + width - 1}"
        bar = "#" * max(1, int(round(40 * c / binned.max())))
        print(f"  {label:>11} ticks {c:6d} {bar}")
    return {"n": int(len(lat)), "p50": p50, "p99": p99, "histogram": {str(int(v)): int(c) for v, c in zip(values, counts)}}


def match(detected: np.ndarray, truth: np.ndarray, before: int, after: int) -> Tuple[np.ndarray, np.ndarray]:
    """Which detections fall in [t - before, t + after] of some truth time, and which truth
    times have a detection there (each detection counts for its nearest truth time)."""
    truth = np.sort(truth)
    hit_truth = np.zeros(len(truth), dtype=bool)
    good = np.zeros(len(detected), dtype=bool)
    if len(truth) == 0:
        return good, hit_truth
    for k, d in enumerate(detected):
        i = np.searchsorted(truth, d)
        for j in (i - 1, i):
            if 0 <= j < len(truth) and truth[j] - before <= d <= truth[j] + after:
                good[k] = True
                hit_truth[j] = True
                break
    return good, hit_truth


def merge(samples: np.ndarray, within: int) -> np.ndarray:
    """Events closer than `within` samples (one spike seen on several channels) as one."""
    s = np.sort(samples)
    if len(s) == 0:
        return s
    keep = np.concatenate([[True], np.diff(s) > within])
    return s[keep]


def summary_of(report: Dict[str, Any], process: str) -> str:
    for p in report.get("processes", []):
        if p.get("name") == process:
            return str(p.get("summary") or p.get("error") or "")
    return ""


def write_nwb(path: Path, data: np.ndarray, rate: float, series: str, description: str) -> Path:
    """`data` (samples, channels) float32 µV as an NWB file's acquisition TimeSeries."""
    import datetime

    from pynwb import NWBHDF5IO, NWBFile, TimeSeries

    path.parent.mkdir(parents=True, exist_ok=True)
    f = NWBFile(
        session_description=description,
        identifier=path.stem,
        session_start_time=datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc),
    )
    f.add_acquisition(TimeSeries(name=series, data=data.astype(np.float32), rate=float(rate), unit="uV", starting_time=0.0))
    with NWBHDF5IO(str(path), "w") as io:
        io.write(f)
    return path


def pink_noise(rng: np.random.Generator, n: int, rms: float, exponent: float = 1.0) -> np.ndarray:
    """1/f^exponent power noise (the background of LFP and EEG) of the given RMS."""
    spec = rng.normal(size=n // 2 + 1) + 1j * rng.normal(size=n // 2 + 1)
    f = np.arange(n // 2 + 1, dtype=np.float64)
    f[0] = 1.0
    x = np.fft.irfft(spec / f ** (exponent / 2), n)
    return (x / x.std() * rms).astype(np.float64)


def make_eeg(seconds: float, rate: int, seed: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two occipital EEG channels (O1, O2; samples x 2, µV): a 10 Hz alpha rhythm whose
    amplitude waxes and wanes over about a second, on 1/f background and noise. Also the
    truth: the alpha's phase (radians; 0 at its peaks) and amplitude at every sample."""
    rng = np.random.default_rng(seed)
    n = int(seconds * rate)
    t = np.arange(n) / rate
    # the amplitude: smoothed noise, 2-25 µV, changing over about a second
    slow = np.convolve(rng.normal(size=n + rate), np.hanning(rate), mode="same")[:n]
    amplitude = 2 + 23 * (slow - slow.min()) / (slow.max() - slow.min())
    phase = 2 * np.pi * 10.0 * t + 0.3
    alpha = amplitude * np.cos(phase)
    eeg = np.stack([alpha + cl_noise(rng, n) for _ in range(2)], axis=1)
    return eeg.astype(np.float32), np.angle(np.exp(1j * phase)), amplitude


def cl_noise(rng: np.random.Generator, n: int) -> np.ndarray:
    return pink_noise(rng, n, 6.0) + rng.normal(0, 1.5, n)


def trigger_latency(listener: Listener, log: "rtloop.log.Log", tmap: TickMap, arrivals: Arrivals) -> Dict[str, Any]:
    """Print the input-to-trigger latency histogram: for each datagram, the tick it arrived in
    minus the tick its event's sample entered the model (`stream_in`); and, on one line, the
    same from the tick the blocks got the sample (after the jitter buffer)."""
    stamps, sent = listener.events()
    got = received_ticks(stamps, log)
    held_tick = event_ticks(sent[:, 1], tmap.rows)
    row = (sent[:, 1].astype(np.int64) - tmap.rows) % tmap.rows
    file_sample = np.array([tmap.file_sample(t, r) for t, r in zip(held_tick, row)], dtype=object)
    ok = np.array([f is not None for f in file_sample], dtype=bool)
    entered = arrivals.of(np.array(list(file_sample[ok]), dtype=np.int64)) if ok.any() else np.zeros(0, np.int64)
    ok_idx = np.flatnonzero(ok)[entered >= 0]
    entered = entered[entered >= 0]
    print(f"triggers: {len(sent)} datagrams received ({len(sent) - len(ok_idx)} of a sample not found in the file)")
    hist = latency_histogram(got[ok_idx] - entered)
    blocks = got - held_tick
    if len(blocks):
        print(
            f"  from the tick the blocks got the sample (after the jitter buffer): "
            f"p50 {np.percentile(blocks, 50):g}, p99 {np.percentile(blocks, 99):g}, max {blocks.max()}"
        )
    hist["from_blocks_p50"] = float(np.percentile(blocks, 50)) if len(blocks) else None
    hist["datagrams"] = int(len(sent))
    hist["not_found"] = int(len(sent) - len(ok_idx))
    return hist


@dataclass
class LoopRun:
    """One run of an example's closed loop, measured: its report and log, the trigger
    listener, which file samples `stream_in` took in which tick, and which the blocks got."""

    report: Dict[str, Any]
    log: "rtloop.log.Log"
    listener: Listener
    arrivals: Arrivals
    tmap: TickMap

    def events(self, signal: str, rows: int, warmup_ticks: int, settle: int = 0) -> Tuple[np.ndarray, np.ndarray]:
        """The events a detector logged in `signal` (rows ``[channel, sample, value]``) and the
        file sample of each one from tick `warmup_ticks` on whose rows are found in the file
        (with `settle`, in ticks `TickMap.settled` that long)."""
        ev_rows = self.log.signals[signal].data.reshape(-1, 3)
        sample = ev_rows[:, 1].astype(np.int64)
        in_tick = event_ticks(sample, rows)
        at = [
            self.tmap.file_sample(int(t), int(s % rows)) if t >= warmup_ticks and self.tmap.settled(t, settle) else None
            for t, s in zip(in_tick, sample)
        ]
        return ev_rows, np.array([a for a in at if a is not None], dtype=np.int64)

    def trigger_latency(self) -> Dict[str, Any]:
        return trigger_latency(self.listener, self.log, self.tmap, self.arrivals)


def run_loop(
    ex: Example, recording: Path, stream: str, replay_extra: Tuple[str, ...],
    incoming: Tuple[str, np.ndarray], blocks_input: Tuple[str, np.ndarray],
) -> LoopRun:
    """Replay `recording` into `stream`, run the example's model with a trigger listener, and
    map what it logged back to the file: `incoming` is the logged signal of what `stream_in`
    took and the file's samples as stored; `blocks_input` the logged signal the blocks got and
    the file's samples as the model sees them."""
    listener = Listener()
    model = ex.model(port=listener.port)
    ex.replay(recording, stream, *replay_extra)
    report = ex.run(model)
    listener.close()
    log = ex.log()
    inc = log.signals[incoming[0]]
    arrivals = Arrivals(inc.tick, inc.rows, inc.data, incoming[1])
    tmap = TickMap(log.signals[blocks_input[0]].tick, log.signals[blocks_input[0]].data, blocks_input[1])
    print(f"stream_in: {arrivals.arrived} samples of the file arrived, in order")
    print(tmap.describe())
    return LoopRun(report, log, listener, arrivals, tmap)
