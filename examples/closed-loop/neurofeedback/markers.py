"""The feedback as LSL markers: run `every: N` ticks, it turns the band power's newest row into
one marker (the mean over the channels). Its output is a variable signal, which `lsl_out`
sends as an irregular-rate stream, LSL's marker stream: one sample when there is something
to say, none on the other ticks."""

import numpy as np


def step(power, marker):
    # one row: the mean alpha power over O1 and O2 at this tick
    return power[-1:].mean(axis=1, keepdims=True).astype(np.float32)
