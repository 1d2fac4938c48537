"""Alpha band-power neurofeedback over LSL on EEG with a known alpha amplitude.

1. numpy makes two EEG channels at 1 kHz: a 10 Hz alpha whose amplitude waxes and wanes (the
   truth), on 1/f background and noise; pynwb writes them to NWB.
2. `rtloop replay` plays the file into the stream `alpha-feedback-eeg` at the recorded pace.
3. `rtloop run model.yaml` sends the alpha band's moving RMS as LSL markers (an irregular-rate
   outlet `alpha-feedback` of type Markers, one every 20 ms); this script reads them with
   pylsl, as a feedback display would.
4. Afterwards: the correlation of each feedback value with what it estimates, the true alpha
   amplitude over the samples it was computed from (the moving RMS's 0.25 s, seen through the
   band-pass's delay), and the latency from the tick whose rows held a sample to the tick its feedback value arrived in.

    python examples/closed-loop/neurofeedback/run.py [--seconds 6]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import rtloop.dsp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import closedloop as cl  # noqa: E402

RATE = 1000
ROWS = 1
WARMUP_TICKS = 1000  # the band-pass settles and the RMS window fills


WINDOW = 250  # the envelope's moving RMS, in samples (model.yaml)
# the band-pass's group delay at the alpha's 10 Hz, in samples: what the RMS sees at a tick
# left the file this much earlier
DELAY = round(rtloop.dsp.SosFilter(1, RATE, "bandpass", (8.0, 12.0), order=2).delay_at(10.0))


def window_truth(tmap: cl.TickMap, tick: int, amplitude: np.ndarray) -> float:
    """What the feedback value at `tick` estimates: the true alpha amplitude's RMS over the
    samples the moving RMS covered then, the rows of the last WINDOW ticks (on a loaded
    machine they may skip or repeat file samples), each DELAY samples earlier. NaN if a tick
    of the window was not found in the file."""
    at = [tmap.file_sample(t, 0) for t in range(tick - WINDOW + 1, tick + 1)]
    if any(a is None for a in at):
        return float("nan")
    samples = np.clip(np.asarray(at, dtype=np.int64) - DELAY, 0, None)
    return float(np.sqrt(np.mean(amplitude[samples] ** 2)))


def main() -> None:
    import pylsl

    args = cl.arguments(__doc__.splitlines()[0], seconds=6.0)
    ex = cl.Example(HERE, "alpha-feedback", args)
    eeg, _, amplitude = cl.make_eeg(args.seconds + 10, RATE, seed=23)
    path = cl.write_nwb(ex.out / "recording" / "eeg.nwb", eeg, RATE, "EEG", "occipital EEG with a known alpha amplitude")
    print(f"recording: {path} ({len(eeg)} samples of O1, O2)")

    model = ex.model()
    ex.replay(path, "alpha-feedback-eeg")
    run = ex.start(model)
    # the feedback display: an LSL inlet on the model's outlet
    values, stamps, arrived = [], [], []
    try:
        found = pylsl.resolve_byprop("name", ex.name, 1, 60)
        if not found:
            sys.exit(f"no LSL outlet named {ex.name} appeared")
        outlet_type, outlet_rate = found[0].type(), found[0].nominal_srate()
        print(f"LSL outlet {ex.name}: type {outlet_type}, nominal rate {outlet_rate:g} (0: irregular, markers)")
        inlet = pylsl.StreamInlet(found[0], max_buflen=60)
        inlet.open_stream(10)
        while run.poll() is None:
            chunk, ts = inlet.pull_chunk(timeout=0.05, max_samples=4096)
            now = pylsl.local_clock()
            if ts:
                values.append(np.asarray(chunk, dtype=np.float32))
                stamps.extend(ts)
                arrived.extend([now] * len(ts))
        time.sleep(0.2)
        chunk, ts = inlet.pull_chunk(timeout=0.5, max_samples=100_000)
        if ts:
            values.append(np.asarray(chunk, dtype=np.float32))
            stamps.extend(ts)
            arrived.extend([pylsl.local_clock()] * len(ts))
    finally:
        report = ex.wait(run)
    log = ex.log()
    fb = np.concatenate(values) if values else np.zeros((0, 1), dtype=np.float32)
    print(f"feedback: {len(fb)} markers received over LSL")

    inc = log.signals["incoming"]
    arrivals = cl.Arrivals(inc.tick, inc.rows, inc.data, eeg)
    tmap = cl.TickMap(log.signals["eeg"].tick, log.signals["eeg"].data, eeg)
    print(f"stream_in: {arrivals.arrived} samples of the file arrived, in order")
    print(tmap.describe())

    # each value's stamp is its tick's start (lsl_out stamps a tick's rows from it): its tick
    stamp_ns = np.round(np.asarray(stamps) * 1e9).astype(np.int64)
    tick = cl.received_ticks(stamp_ns + 1000, log, clock="monotonic")  # + 1 µs: the stamp is the start itself
    truth = np.array([window_truth(tmap, t, amplitude) if t >= WARMUP_TICKS else np.nan for t in tick])
    ok = ~np.isnan(truth)
    nf = fb[ok, 0]  # each marker: the mean of O1 and O2
    r = float(np.corrcoef(nf, truth[ok])[0, 1]) if ok.sum() > 10 else float("nan")
    print(
        f"quality: {int(ok.sum())} feedback values after the first second; correlation with the true alpha "
        f"amplitude over the samples each was computed from r = {r:.3f}"
    )

    # latency: the tick the value arrived at the inlet in (pylsl's clock is CLOCK_MONOTONIC)
    # minus the tick its newest input sample entered the model in (stream_in)
    got_tick = cl.received_ticks(np.round(np.asarray(arrived) * 1e9).astype(np.int64), log, clock="monotonic")
    every = np.array([tmap.file_sample(t, 0) for t in tick], dtype=object)
    known = np.array([a is not None for a in every], dtype=bool)
    entered = np.full(len(tick), -1, dtype=np.int64)
    entered[known] = arrivals.of(np.array(list(every[known]), dtype=np.int64))
    measured = entered >= 0
    print(f"feedback values: {len(tick)} received ({int((~measured).sum())} of a sample not found in the file)")
    hist = cl.latency_histogram(got_tick[measured] - entered[measured], what="input-to-feedback latency", of="values")
    blocks = got_tick - tick
    print(f"  from the tick the blocks got the sample: p50 {np.percentile(blocks, 50):g}, p99 {np.percentile(blocks, 99):g}")
    print(f"view it: rtloop view {ex.name}-alpha (while the model runs)")
    ex.figures = {
        "correlation": r, "values": int(ok.sum()), "received": int(len(fb)), "latency_ticks": hist,
        "lsl_type": outlet_type, "lsl_rate": outlet_rate,
        "repeated_ticks": tmap.repeated_ticks, "skipped_samples": tmap.skipped_samples,
        "report_processes": [p.get("name") for p in report.get("processes", [])],
    }
    ex.finish()


if __name__ == "__main__":
    main()
