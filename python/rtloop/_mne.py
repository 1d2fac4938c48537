"""Windows and recordings as ``mne.io.RawArray`` (when MNE is installed).

MNE stores EEG, MEG and similar channels in SI units (volts, teslas) and shapes data
``(n_channels, n_times)``; rtloop keeps each channel's own unit and shapes windows
``(n_samples, n_channels)``. The conversion scales by the unit each channel was given and
transposes; channels without a type known to MNE become ``misc`` (kept as they are).
"""

from __future__ import annotations

import importlib
from typing import Any, List, Sequence, Tuple

import numpy as np
from numpy.typing import NDArray

#: unit text -> factor to SI (only for units MNE expects in SI)
_SCALE = {
    "v": 1.0,
    "volts": 1.0,
    "mv": 1e-3,
    "millivolts": 1e-3,
    "uv": 1e-6,
    "µv": 1e-6,
    "μv": 1e-6,
    "microvolts": 1e-6,
    "nv": 1e-9,
    "nanovolts": 1e-9,
    "t": 1.0,
    "ft": 1e-15,
    "femtoteslas": 1e-15,
}


def event_text(type_: Any, value: Any) -> str:
    """``"type=value"`` for an annotation: a one-element array as its element, a whole
    float as an integer (the recorder stores numeric values as float arrays)."""

    def plain(v: Any) -> Any:
        if isinstance(v, (list, tuple)) and len(v) == 1:
            v = v[0]
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        return v

    return f"{plain(type_)}={plain(value)}"


def import_mne() -> Any:
    try:
        mne = importlib.import_module("mne")
    except ImportError:
        raise ImportError(
            "converting to MNE needs the mne package: pip install mne"
        ) from None
    return mne


def raw_array(
    data: NDArray[Any],
    sfreq: float,
    ch_names: Sequence[str],
    ch_types: Sequence[str],
    ch_units: Sequence[str],
    annotations: Sequence[Tuple[float, float, str]] = (),
) -> Any:
    """``data`` shaped ``(n_times, n_channels)`` -> ``mne.io.RawArray``.

    ``annotations`` are ``(onset, duration, description)`` in seconds from the first row.
    """
    mne = import_mne()
    if not sfreq > 0:
        raise ValueError(
            "MNE needs a regular sampling rate, but this stream is irregular (sfreq 0); "
            "give the stream a rate at creation or resample the window yourself"
        )
    known = set(mne.io.get_channel_type_constants())
    types: List[str] = []
    for k in range(len(ch_names)):
        t = ch_types[k].lower() if k < len(ch_types) and ch_types[k] else "misc"
        types.append(t if t in known else "misc")
    info = mne.create_info(list(ch_names), float(sfreq), types)
    scaled = np.array(data, dtype=np.float64, copy=True).T
    for k, unit in enumerate(ch_units):
        factor = _SCALE.get(unit.strip().lower())
        if factor is not None and factor != 1.0:
            scaled[k] *= factor
    raw = mne.io.RawArray(scaled, info, verbose="error")
    if annotations:
        onsets, durations, descriptions = zip(*annotations)
        raw.set_annotations(mne.Annotations(list(onsets), list(durations), list(descriptions)))
    return raw
