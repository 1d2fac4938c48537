"""Window helpers mne-lsl users reach for: `Reader.get_data(winsize)` (the newest seconds with
timestamps, channels first as every MNE get_data), a zero-copy ring-backed view for plotting,
and windows and recordings as `mne.io.RawArray` (MNE from PyPI)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import rtloop
from _peers import need


def filled(name: str, n: int = 1000, sfreq: float = 100.0) -> tuple:
    s = rtloop.Stream.create(
        name, n_channels=3, sfreq=sfreq, capacity=4096,
        ch_names=["Fz", "Cz", "TRIG"], ch_units=["uV", "uV", ""], ch_types=["eeg", "eeg", "stim"],
    )
    w = s.writer()
    x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
    w.push_chunk(x)
    return s, w, x


def test_get_data_returns_the_newest_seconds_channels_first_with_timestamps(make_name: Callable[[], str]) -> None:
    s, w, x = filled(make_name())
    r = s.reader()
    data, ts = r.get_data(winsize=2.0)  # 2 s at 100 Hz: the newest 200 samples
    assert data.shape == (3, 200) and ts.shape == (200,)
    np.testing.assert_array_equal(data, x[-200:].T)
    assert np.all(np.diff(ts) >= 0) and ts[-1] <= rtloop.local_clock()
    # partial seconds round up to whole samples; None: everything kept
    assert r.get_data(0.015)[0].shape == (3, 2)
    np.testing.assert_array_equal(r.get_data()[0], x.T)
    # a window longer than what was written: what there is
    assert r.get_data(60.0)[0].shape == (3, 1000)
    # picks by name, by type, by index
    np.testing.assert_array_equal(r.get_data(1.0, picks="TRIG")[0], x[-100:, 2:].T)
    np.testing.assert_array_equal(r.get_data(1.0, picks="eeg")[0], x[-100:, :2].T)
    np.testing.assert_array_equal(r.get_data(1.0, picks=[2, 0])[0], x[-100:, [2, 0]].T)
    # the cursor did not move
    assert r.cursor == 1000
    w.close()


def test_get_data_view_is_zero_copy_of_the_ring_and_knows_when_it_was_lapped(make_name: Callable[[], str]) -> None:
    s, w, x = filled(make_name())
    r = s.reader()
    view, ts = r.get_data(1.0, copy=False)
    assert view.shape == (3, 100) and not view.flags.writeable
    assert view.base is not None  # a view, not an owner of its memory
    np.testing.assert_array_equal(view, x[-100:].T)
    np.testing.assert_array_equal(ts, r.get_data(1.0)[1])
    assert r.valid(view.T)
    # the writer laps the window: the view says so instead of passing stale data as valid
    w.push_chunk(np.zeros((s.capacity, 3), np.float32))
    assert not r.valid(view.T)
    with pytest.raises(rtloop.OverrunError):
        r.check(view.T)
    w.close()


def test_get_data_on_an_irregular_stream_uses_the_stamps(make_name: Callable[[], str]) -> None:
    s = rtloop.Stream.create(make_name(), n_channels=1, sfreq=0.0)
    w = s.writer()
    now = rtloop.local_clock()
    for k in range(5):
        w.push_sample(np.array([k], np.float32), timestamp=now - 10 + k)  # 10..6 s ago
    for k in range(3):
        w.push_sample(np.array([10 + k], np.float32), timestamp=now - 0.3 + 0.1 * k)
    data, ts = s.reader().get_data(winsize=1.0)
    np.testing.assert_array_equal(data[0], [10, 11, 12])
    w.close()


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"winsize": 0}, ValueError, "Allowed values are seconds > 0 or None"),
        ({"winsize": -1.0}, ValueError, "Allowed values are seconds > 0 or None"),
        ({"winsize": "1s"}, ValueError, "but got '1s' instead"),
        ({"picks": "Oz"}, ValueError, "'Oz' is neither a channel name nor a channel type"),
        ({"picks": [5]}, ValueError, "channel index 5 is out of range for 3 channels"),
        ({"picks": [1.5]}, TypeError, "takes channel names, channel types or indices"),
        ({"copy": "no"}, TypeError, "The 'copy' parameter must be an instance of 'bool'"),
    ],
)
def test_bad_window_requests_say_what_is_allowed(
    make_name: Callable[[], str], kwargs: dict, error: type, message: str
) -> None:
    s, w, _ = filled(make_name())
    with pytest.raises(error, match=message):
        s.reader().get_data(**kwargs)
    w.close()


def test_a_window_becomes_an_mne_raw_in_volts_with_events_as_annotations(make_name: Callable[[], str]) -> None:
    mne = need("mne", "mne")
    s, w, x = filled(make_name())
    w.push_event("stim", "on", 950)
    raw = s.reader().to_mne(winsize=1.0)
    assert isinstance(raw, mne.io.RawArray)
    assert raw.ch_names == ["Fz", "Cz", "TRIG"]
    assert raw.get_channel_types() == ["eeg", "eeg", "stim"]
    assert raw.info["sfreq"] == 100.0 and raw.n_times == 100
    got = raw.get_data()
    np.testing.assert_allclose(got[:2], x[-100:, :2].T * 1e-6)  # microvolts -> volts
    np.testing.assert_array_equal(got[2], x[-100:, 2])  # no unit: as is
    assert list(raw.annotations.description) == ["stim=on"]
    assert raw.annotations.onset[0] == pytest.approx(0.5)  # sample 950 of [900, 1000)
    w.close()


def test_a_recording_becomes_an_mne_raw(make_name: Callable[[], str], tmp_path: Path) -> None:
    mne = need("mne", "mne")
    name = make_name()
    s = rtloop.Stream.create(
        name, n_channels=2, sfreq=500.0, ch_names=["C3", "C4"], ch_units=["uV", "uV"],
        ch_types="eeg", content_type="EEG", source_id="amp-9",
    )
    w = s.writer()
    rec = subprocess.Popen(
        [sys.executable, "-m", "rtloop", "record", name, "--out", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 30
    while not any(r["alive"] for r in s.stats()["readers"]):
        assert time.monotonic() < deadline, "the recorder did not register"
        time.sleep(0.02)
    x = np.random.default_rng(3).standard_normal((1000, 2)).astype(np.float32)
    w.push_chunk(x)
    w.push_event("cue", 7, 250)
    w.close()
    out, err = rec.communicate(timeout=30)
    assert rec.returncode == 0, err
    recording = rtloop.load(tmp_path / name)
    assert recording.header["content_type"] == "EEG" and recording.header["source_id"] == "amp-9"
    raw = recording.to_mne()
    assert raw.get_channel_types() == ["eeg", "eeg"] and raw.n_times == 1000
    np.testing.assert_allclose(raw.get_data(), x.T.astype(np.float64) * 1e-6)
    assert list(raw.annotations.description) == ["cue=7"]
    assert raw.annotations.onset[0] == pytest.approx(0.5)


def test_mne_needs_a_regular_rate(make_name: Callable[[], str]) -> None:
    need("mne", "mne")
    s = rtloop.Stream.create(make_name(), n_channels=1, sfreq=0.0)
    w = s.writer()
    w.push_chunk(np.zeros((10, 1), np.float32))
    with pytest.raises(ValueError, match="MNE needs a regular sampling rate"):
        s.reader().to_mne()
    w.close()
