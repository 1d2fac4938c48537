"""Band-pass 300-3000 Hz (4th-order Butterworth, state kept across ticks) and a threshold at
-4.5 robust standard deviations per channel; a detection sets the channel's flag and the
trigger, which the `stim` sink sends out in the same tick."""

import numpy as np
from scipy.signal import butter, sosfilt

FS = 30_000.0
SOS = butter(2, [300.0, 3000.0], btype="bandpass", fs=FS, output="sos")
LEARN_TICKS = 200  # the noise level is learned from the first ticks (options: learn_ticks)
K = 4.5  # threshold in robust standard deviations (options: k)

zi = np.zeros(0)
sigma = np.zeros(0)
ticks = 0
detections = 0


def init(ctx, k: float = 4.5, learn_ticks: int = 200):
    """Runs once before tick 0 with the model's options: the filter state is sized from the
    input's shape here, not in the first tick."""
    global K, LEARN_TICKS, zi, sigma
    K, LEARN_TICKS = k, learn_ticks
    channels = ctx.inputs["raw"].shape[1]
    zi = np.zeros((SOS.shape[0], 2, channels))
    sigma = np.zeros(channels)


def step(raw, spikes, trigger):
    global zi, sigma, ticks, detections
    filtered, zi = sosfilt(SOS, raw, axis=0, zi=zi)
    ticks += 1
    if ticks <= LEARN_TICKS:
        # robust noise estimate (median absolute value / 0.6745), averaged over ticks
        sigma += (np.median(np.abs(filtered), axis=0) / 0.6745 - sigma) / ticks
        spikes[:] = 0
        trigger[0] = 0
        return
    crossed = (filtered < -K * sigma).any(axis=0)
    spikes[:] = crossed
    trigger[0] = 1 if crossed.any() else 0
    detections += int(crossed.sum())


def finish():
    return f"{detections} detections"
