"""Spike-triggered stimulation on a replayed SpikeGLX recording.

1. SpikeInterface's ground-truth generator makes 16 channels of spikes on noise at 30 kHz (the
   spike times are the truth); they are written as a Neuropixels 1.0 run, .bin + .meta.
2. `rtloop replay` plays the .bin into the stream `spike-loop-probe` at the recorded pace.
3. `rtloop run model.yaml` detects spikes and sends one UDP datagram per spike; this script
   listens on that socket.
4. Afterwards: recall and precision against the generator's spike times, and the
   input-to-trigger latency in ticks.

    python examples/closed-loop/spikes/run.py [--seconds 6]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import closedloop as cl  # noqa: E402

RATE = 30000
N_AP = 16
UV_PER_COUNT = 0.6 / 512 / 1500 * 1e6  # imAiRangeMax / imMaxInt / AP gain, in µV
K = 5.0  # the detector's threshold in noise sigmas (model.yaml: k)
WARMUP_TICKS = 1000  # the detector's noise level is learnt over its first 0.5 s: skip 1 s
# scored only where the blocks' input ran on without a gap for 3 ms: the band-pass rings for
# about 2 ms after a jump (a loaded machine's skipped samples, a held sample), and what it
# detects then is the jump's, not a spike's
SETTLE_TICKS = 3


def make_recording(folder: Path, seconds: float) -> tuple[Path, np.ndarray, dict]:
    """A SpikeGLX run: run_g0/run_g0_imec0/run_g0_t0.imec0.ap.bin + .meta; its samples as
    stored (int16) and each unit's spike times (samples)."""
    import spikeinterface.core as si

    rec, sorting = si.generate_ground_truth_recording(
        durations=[seconds], sampling_frequency=float(RATE), num_channels=N_AP, num_units=5, seed=17
    )
    uv = rec.get_traces()
    counts = np.clip(np.round(uv / UV_PER_COUNT), -32768, 32767).astype(np.int16)
    sync = ((np.arange(len(counts)) // (RATE // 2)) % 2).astype(np.int16)[:, None]  # SY0: a 1 Hz square wave
    data = np.hstack([counts, sync])
    run = folder / "run_g0" / "run_g0_imec0"
    run.mkdir(parents=True, exist_ok=True)
    bin_path = run / "run_g0_t0.imec0.ap.bin"
    data.astype("<i2").tofile(bin_path)
    imro = "(0,384)" + "".join(f"({c} 0 0 1500 250 1)" for c in range(384))
    chans = "(384,0,1)" + "".join(f"(AP{c};{c}:{c})" for c in range(N_AP)) + "(SY0;768:768)"
    meta = {
        "fileName": bin_path, "fileSizeBytes": data.nbytes, "fileTimeSecs": len(data) / RATE,
        "firstSample": 0, "typeThis": "imec", "imDatPrb_type": 0, "imDatPrb_pn": "NP1000",
        "imSampRate": RATE, "imAiRangeMax": 0.6, "imAiRangeMin": -0.6, "imMaxInt": 512,
        "nSavedChans": N_AP + 1, "snsApLfSy": f"{N_AP},0,1", "snsSaveChanSubset": f"0:{N_AP - 1},768",
        "~imroTbl": imro, "~snsChanMap": chans,
    }
    bin_path.with_suffix(".meta").write_text("".join(f"{k}={v}\n" for k, v in meta.items()))
    return bin_path, data, {str(u): sorting.get_unit_spike_train(u) for u in sorting.unit_ids}


def main() -> None:
    args = cl.arguments(__doc__.splitlines()[0], seconds=6.0)
    ex = cl.Example(HERE, "spike-loop", args)
    # the replay starts before the model, which takes a few seconds to start: 10 s to spare
    bin_path, data, units = make_recording(ex.out / "recording", args.seconds + 10)
    truth = np.sort(np.concatenate(list(units.values())))
    print(f"recording: {bin_path} ({len(data)} samples, {len(truth)} spikes of 5 units)")

    rows = 30
    uv = (data[:, :N_AP].astype(np.float32) * np.float32(UV_PER_COUNT)).astype(np.float32)
    loop = cl.run_loop(
        ex, bin_path.parent.parent, "spike-loop-probe", ("--series", "imec0.ap"), ("counts", data), ("uv", uv)
    )
    tmap = loop.tmap
    # every event the detector logged, its sample as a file sample
    ev_rows, detected = loop.events("spikes", rows, WARMUP_TICKS, SETTLE_TICKS)

    seen = tmap.seen(WARMUP_TICKS, SETTLE_TICKS)
    # a spike's time is the generator's; the trough a channel sees comes up to 2 ms after it
    # (farther channels later): a detection from 1 ms before to 2 ms after a true spike is a hit
    detected = cl.merge(detected, within=30)
    truth_seen = truth[np.isin(truth, seen)]
    good, hit = cl.match(detected, truth_seen, before=30, after=60)
    recall = float(hit.mean()) if len(hit) else 0.0
    precision = float(good.mean()) if len(good) else 0.0
    # per unit: its SNR (the trough of its mean waveform over the channel's noise) and recall
    per_unit = {}
    noise = np.median(np.abs(uv - np.median(uv, axis=0)), axis=0) / 0.6745
    for u, st in units.items():
        st = st[(st > 60) & (st < len(uv) - 60)]
        template = np.mean([uv[t - 30 : t + 60] for t in st[:200]], axis=0)
        snr = float((-template.min(axis=0) / noise).max())
        seen_u = st[np.isin(st, seen)]
        _, hit_u = cl.match(detected, seen_u, before=30, after=60)
        per_unit[u] = {"snr": snr, "spikes": int(len(seen_u)), "recall": float(hit_u.mean()) if len(hit_u) else 0.0}
    big = [u for u, f in per_unit.items() if f["snr"] >= K]
    big_truth = np.sort(np.concatenate([units[u] for u in big])) if big else np.zeros(0, np.int64)
    _, hit_big = cl.match(detected, big_truth[np.isin(big_truth, seen)], before=30, after=60)
    recall_big = float(hit_big.mean()) if len(hit_big) else 0.0
    print(
        f"quality, in the {len(seen) // rows} ticks after the first second that ran on without a gap for "
        f"{SETTLE_TICKS} ms: {len(truth_seen)} true spikes reached the blocks, {len(detected)} detected "
        f"(events within 1 ms counted once): precision {precision:.3f}, recall {recall:.3f} of all units, "
        f"recall {recall_big:.3f} of the {len(big)} units at least {K:g} noise sigmas deep (the threshold)"
    )
    for u, f in per_unit.items():
        print(f"  unit {u}: SNR {f['snr']:.1f}, {f['spikes']} spikes, recall {f['recall']:.3f}")
    print(f"events: {len(ev_rows)} logged")
    hist = loop.trigger_latency()
    print(f"view it: rtloop view {ex.name}-filtered (while the model runs)")
    ex.figures = {
        "recall": recall, "recall_detectable": recall_big, "precision": precision, "units": per_unit, "true_spikes": int(len(truth_seen)),
        "detections": int(len(detected)), "datagrams": hist["datagrams"], "events_logged": int(len(ev_rows)),
        "latency_ticks": hist, "repeated_ticks": tmap.repeated_ticks, "skipped_samples": tmap.skipped_samples,
        "report_processes": [p.get("name") for p in loop.report.get("processes", [])],
    }
    ex.finish()


if __name__ == "__main__":
    main()
