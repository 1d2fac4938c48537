"""Band-pass 300-3000 Hz (4th-order Butterworth, state kept across ticks) and a threshold at
-4.5 robust standard deviations per channel; a detection sets the channel's flag and the
trigger, which the `stim` sink sends out in the same tick."""

import numpy as np
from scipy.signal import butter, sosfilt

FS = 30_000.0
SOS = butter(2, [300.0, 3000.0], btype="bandpass", fs=FS, output="sos")
LEARN_TICKS = 200  # the noise level is learned from the first 200 ms
K = 4.5

zi = None
sigma = None
ticks = 0
detections = 0


def step(raw, spikes, trigger):
    global zi, sigma, ticks, detections
    if zi is None:
        zi = np.zeros((SOS.shape[0], 2, raw.shape[1]))
        sigma = np.zeros(raw.shape[1])
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
