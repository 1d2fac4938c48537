"""Ripple-triggered stimulation on synthetic hippocampal LFP with ripples at known times.

1. numpy makes 2 kHz LFP: 1/f^2 background, theta and noise, and 150-220 Hz ripples of 50-90 ms
   at known times (the truth); pynwb writes it as an NWB file.
2. `rtloop replay` plays it into the stream `ripple-loop-lfp` at the recorded pace.
3. `rtloop run model.yaml` detects ripples and sends one UDP datagram per ripple; this script
   listens on that socket.
4. Afterwards: recall and precision against the inserted ripples, and the input-to-trigger
   latency in ticks.

    python examples/closed-loop/ripples/run.py [--seconds 6]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import closedloop as cl  # noqa: E402

RATE = 2000
ROWS = 2  # samples per 1 ms tick
WARMUP_TICKS = 1100  # the detector's warm-up (1 s) and a little more


def make_lfp(seconds: float, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """LFP (samples, 1) in µV and the ripples' [start, end] samples."""
    rng = np.random.default_rng(seed)
    n = int(seconds * RATE)
    t = np.arange(n) / RATE
    lfp = cl.pink_noise(rng, n, 60.0, exponent=2.0) + 50 * np.sin(2 * np.pi * 8 * t) + rng.normal(0, 4, n)
    ripples = []
    at = 0.4
    while at < seconds - 0.2:
        dur = rng.uniform(0.05, 0.09)
        freq = rng.uniform(150, 220)
        amp = rng.uniform(25, 50)
        i0, i1 = int((at - dur / 2) * RATE), int((at + dur / 2) * RATE)
        k = np.arange(i0, i1)
        env = np.exp(-0.5 * ((t[k] - at) / (dur / 4)) ** 2)
        lfp[k] += amp * env * np.sin(2 * np.pi * freq * t[k] + rng.uniform(0, 2 * np.pi))
        ripples.append((i0, i1))
        at += rng.uniform(0.3, 0.7)
    return lfp[:, None].astype(np.float32), np.array(ripples, dtype=np.int64)


def main() -> None:
    args = cl.arguments(__doc__.splitlines()[0], seconds=6.0)
    ex = cl.Example(HERE, "ripple-loop", args)
    lfp, truth = make_lfp(args.seconds + 10)
    path = cl.write_nwb(ex.out / "recording" / "lfp.nwb", lfp, RATE, "LFP", "CA1 LFP with ripples at known times")
    print(f"recording: {path} ({len(lfp)} samples, {len(truth)} ripples)")

    loop = cl.run_loop(ex, path, "ripple-loop-lfp", (), ("incoming", lfp), ("lfp", lfp))
    tmap = loop.tmap
    ev_rows, detected = loop.events("ripples", ROWS, WARMUP_TICKS)
    seen = tmap.seen(WARMUP_TICKS)
    centre = (truth[:, 0] + truth[:, 1]) // 2
    shown = np.isin(centre, seen)
    truth_seen = truth[shown]
    # a detection belongs to a ripple if it comes between the ripple's start and 40 ms after
    # its end (the detector waits for 15 ms above threshold, the band-pass and RMS lag)
    good = np.zeros(len(detected), dtype=bool)
    hit = np.zeros(len(truth_seen), dtype=bool)
    for k, d in enumerate(detected):
        inside = (truth_seen[:, 0] <= d) & (d <= truth_seen[:, 1] + int(0.04 * RATE))
        good[k] = inside.any() or ((truth[:, 0] <= d) & (d <= truth[:, 1] + int(0.04 * RATE))).any()
        hit |= inside
    recall = float(hit.mean()) if len(hit) else 0.0
    precision = float(good.mean()) if len(good) else 0.0
    delay_ms = [(d - truth[np.argmin(np.abs(truth[:, 0] - d)), 0]) / RATE * 1000 for d in detected[good]]
    print(
        f"quality: {len(truth_seen)} ripples reached the model after its warm-up, {len(detected)} detected: "
        f"recall {recall:.3f}, precision {precision:.3f}; "
        f"detected {np.median(delay_ms) if delay_ms else float('nan'):.1f} ms after a ripple's start (median)"
    )

    print(f"events: {len(ev_rows)} logged")
    hist = loop.trigger_latency()
    print(f"view it: rtloop view {ex.name}-band (while the model runs)")
    ex.figures = {
        "recall": recall, "precision": precision, "true_ripples": int(len(truth_seen)),
        "detections": int(len(detected)), "datagrams": hist["datagrams"], "events_logged": int(len(ev_rows)),
        "latency_ticks": hist, "median_delay_ms": float(np.median(delay_ms)) if delay_ms else None,
        "repeated_ticks": tmap.repeated_ticks, "skipped_samples": tmap.skipped_samples,
        "report_processes": [p.get("name") for p in loop.report.get("processes", [])],
    }
    ex.finish()


if __name__ == "__main__":
    main()
