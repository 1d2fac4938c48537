"""Signal-processing blocks for closed loops, on the chunks a reader pulls.

Each block is rtloop's Rust block (crate ``rtloop-dsp``) behind a Python class: it takes
numpy chunks shaped ``(samples, channels)`` of float32 or float64, as
:meth:`rtloop.Reader.pull_chunk` returns them, keeps its state from one call of
``process`` to the next (a chunk of any length, one sample included, gives what the whole
signal would), and returns numpy arrays. Each states its delay in samples
(``delay_samples``) and refuses bad parameters with ``ValueError`` saying what is allowed.
The work runs without the GIL.

* :class:`SosFilter`: Butterworth low-, high- and band-pass and notch filters (scipy's
  ``butter(..., output="sos")`` and ``iirnotch``), run as ``scipy.signal.sosfilt`` with the
  state carried.
* :class:`Reref`: common average or median reference over chosen channels.
* :class:`SpikeDetector`: threshold crossings of a running robust noise estimate; events
  ``channel``, ``sample``, ``peak``.
* :class:`MovingRms`: the envelope.
* :class:`Decimator`: anti-aliased decimation by a whole factor.
* :class:`RippleDetector`: sharp-wave ripples; events ``channel``, ``onset``, ``detected``.
* :class:`PhaseTracker`: causal phase (ecHT) and a trigger at a target phase; events
  ``channel``, ``sample``, ``phase``.

A block keeps the dtype of its first chunk (its state is of that type) until ``reset()``;
:class:`RippleDetector` and :class:`PhaseTracker` compute in float64 and take either.
Event samples are counted from the first sample the block was given. A block is not
thread-safe: give each thread its own.

>>> import numpy as np
>>> from rtloop.dsp import SosFilter
>>> f = SosFilter(channels=4, rate=1000.0, btype="bandpass", freq=(300.0, 400.0), order=4)
>>> f.process(np.zeros((10, 4), np.float32)).shape
(10, 4)
"""

from __future__ import annotations

from ._rtloop import (
    Decimator,
    MovingRms,
    PhaseTracker,
    Reref,
    RippleDetector,
    SosFilter,
    SpikeDetector,
)

__all__ = [
    "Decimator",
    "MovingRms",
    "PhaseTracker",
    "Reref",
    "RippleDetector",
    "SosFilter",
    "SpikeDetector",
]
