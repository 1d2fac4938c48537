"""Alpha-phase-locked stimulation on EEG with a known 10 Hz alpha rhythm.

1. numpy makes two EEG channels at 1 kHz: a 10 Hz alpha whose amplitude waxes and wanes, on
   1/f background and noise (the alpha's phase is the truth); pynwb writes them to NWB.
2. `rtloop replay` plays the file into the stream `alpha-loop-eeg` at the recorded pace.
3. `rtloop run model.yaml` triggers at the alpha's peaks (phase 0) and sends one UDP datagram
   per trigger; this script listens on that socket.
4. Afterwards: the true phase at each trigger (circular mean and spread of the error against
   the target), and the input-to-trigger latency in ticks.

    python examples/closed-loop/alpha-phase/run.py [--seconds 6]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import closedloop as cl  # noqa: E402

RATE = 1000
ROWS = 1
TARGET = 0.0  # the model's `target`
WARMUP_TICKS = 500  # the phase window fills in 0.5 s


def main() -> None:
    args = cl.arguments(__doc__.splitlines()[0], seconds=6.0)
    ex = cl.Example(HERE, "alpha-loop", args)
    eeg, phase, amplitude = cl.make_eeg(args.seconds + 10, RATE, seed=11)
    path = cl.write_nwb(ex.out / "recording" / "eeg.nwb", eeg, RATE, "EEG", "occipital EEG with a known alpha rhythm")
    print(f"recording: {path} ({len(eeg)} samples of O1, O2)")

    loop = cl.run_loop(ex, path, "alpha-loop-eeg", (), ("incoming", eeg), ("eeg", eeg))
    tmap = loop.tmap
    ev_rows, file_samples = loop.events("peaks", ROWS, WARMUP_TICKS)
    err = np.angle(np.exp(1j * (phase[file_samples] - TARGET)))
    resultant = np.mean(np.exp(1j * err)) if len(err) else 0j
    mean_err = float(np.angle(resultant))
    spread = float(np.sqrt(-2 * np.log(max(abs(resultant), 1e-12)))) if len(err) else float("nan")
    cycles = len(tmap.seen(WARMUP_TICKS)) / RATE * 10.0 * 2  # alpha cycles the two channels showed
    print(
        f"quality: {len(err)} triggers after the first 0.5 s on {cycles:.0f} alpha cycles (both channels); "
        f"phase error (true phase at the trigger minus the target): circular mean {np.degrees(mean_err):+.1f} deg, "
        f"circular spread {np.degrees(spread):.1f} deg"
    )

    print(f"events: {len(ev_rows)} logged")
    hist = loop.trigger_latency()
    print(f"view it: rtloop view {ex.name}-alpha (while the model runs)")
    ex.figures = {
        "triggers": int(len(err)), "alpha_cycles": cycles, "phase_error_mean_rad": mean_err,
        "phase_error_spread_rad": spread, "datagrams": hist["datagrams"], "events_logged": int(len(ev_rows)),
        "latency_ticks": hist, "repeated_ticks": tmap.repeated_ticks, "skipped_samples": tmap.skipped_samples,
        "report_processes": [p.get("name") for p in loop.report.get("processes", [])],
    }
    ex.finish()


if __name__ == "__main__":
    main()
