"""A jitter buffer between a stream and the blocks: every sample of the stream exactly once,
`rows` a tick, a few ticks late.

`stream_in` with a fixed signal hands the model the stream's newest rows at each tick: when
the writer (a replay, an amplifier's driver) is late for a tick, that tick repeats the last
tick's samples and the next one skips as many, which a filter or a detector sees as a glitch
and a lost spike. Here `stream_in` writes a variable signal instead (every new sample in
order) and this module queues them and releases exactly `rows` a tick once `depth` ticks of
samples are queued. If the queue runs dry it repeats the last sample (counted) and waits for
`depth` ticks of samples again; if it grows past twice `depth` (the writer caught up after a
stall) the oldest samples beyond `depth` are dropped (counted), so the delay stays `depth`
ticks. It also converts: the first `width` values of each row (the output's), times `gain`,
as float32.
"""

import numpy as np

# the queue and its counters, made by init (module globals: kept from tick to tick)
FIFO = np.zeros((0, 0), dtype=np.float32)
LAST = np.zeros(0, dtype=np.float32)
GAIN = np.float32(1.0)
STATE = np.zeros(7, dtype=np.int64)


def init(ctx, depth: int = 4, gain: float = 1.0):
    """`depth`: ticks of samples kept queued; `gain`: factor to the output's unit (µV per
    count for SpikeGLX: imAiRangeMax / imMaxInt / gain x 1e6)."""
    global FIFO, LAST, GAIN, STATE
    (out,) = ctx.outputs.values()
    rows, width = out.shape
    FIFO = np.zeros((rows * (2 * depth + 2) + 4096, width), dtype=np.float32)
    LAST = np.zeros(width, dtype=np.float32)
    GAIN = np.float32(gain)
    # samples queued, primed, ticks it ran dry, samples held, samples dropped, rows, depth
    STATE = np.array([0, 0, 0, 0, 0, rows, depth * rows], dtype=np.int64)


def step(incoming, buffered):
    fifo, state, last = FIFO, STATE, LAST
    count, rows, depth = int(state[0]), int(state[5]), int(state[6])
    n = incoming.shape[0]
    width = buffered.shape[1]
    room = fifo.shape[0] - count
    if n > room:  # more than the queue holds: the oldest go
        drop = n - room
        fifo[: count - drop] = fifo[drop:count]
        count -= drop
        state[4] += drop
    fifo[count : count + n] = incoming[:, :width].astype(np.float32) * GAIN
    count += n
    if count > 2 * depth:  # the writer caught up after a stall: back to `depth` samples queued
        drop = count - depth
        fifo[:depth] = fifo[drop:count]
        count = depth
        state[4] += drop
    if not state[1] and count >= depth:
        state[1] = 1
    if not state[1]:
        buffered[:] = last
        state[3] += rows
    elif count >= rows:
        buffered[:] = fifo[:rows]
        fifo[: count - rows] = fifo[rows:count]
        count -= rows
        last[:] = buffered[-1]
    else:  # ran dry: what there is, then the last sample held; queue `depth` again
        buffered[:count] = fifo[:count]
        if count:
            last[:] = fifo[count - 1]
        buffered[count:] = last
        state[2] += 1
        state[3] += rows - count
        count = 0
        state[1] = 0
    state[0] = count


def finish():
    return (
        f"ran dry in {STATE[2]} ticks ({STATE[3]} samples held), "
        f"{STATE[4]} samples dropped to stay {STATE[6] // max(STATE[5], 1)} ticks behind"
    )
