"""rtloop.dsp: the Rust blocks from Python, held against scipy and numpy on the same data.

Filters equal ``scipy.signal.sosfilt`` with its ``zi`` carried over the same chunks (one-sample
chunks included), with the design ``scipy.signal.butter(..., output="sos")`` / ``iirnotch``
makes: float64 within 1e-9 and float32 within 1e-5 of the output's largest magnitude. The
same holds on chunks pulled from a real stream. Re-referencing equals numpy's mean / median
subtraction, the envelope numpy's moving RMS, decimation scipy's filter-then-keep; spikes
injected at known places are found on their channel at their sample; bad parameters and bad
chunks are refused with what is allowed.
"""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

import numpy as np
import pytest
from numpy.typing import NDArray

signal = pytest.importorskip("scipy.signal")

import rtloop  # noqa: E402
from rtloop import dsp  # noqa: E402

TOL = {np.float64: 1e-9, np.float32: 1e-5}


def make_input(n: int, ch: int, rate: float, seed: int = 7) -> NDArray[np.float64]:
    """A sine per channel in the pass band and one out of it, plus noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)[:, None] / rate
    c = np.arange(ch)[None, :]
    f1 = 7.0 + 13.0 * c
    f2 = rate * (0.11 + 0.07 * c)
    x = 100.0 * np.sin(2 * np.pi * f1 * t) + 40.0 * np.sin(2 * np.pi * f2 * t)
    return x + 30.0 * (rng.random((n, ch)) - 0.5)


def chunking(n: int, kind: str, seed: int = 3) -> List[int]:
    """Chunk lengths summing to n: all ones, one chunk, or runs of ones between random ones."""
    if kind == "ones":
        return [1] * n
    if kind == "whole":
        return [n]
    rng = np.random.default_rng(seed)
    out: List[int] = []
    while sum(out) < n:
        c = 1 if len(out) % 5 < 2 else int(rng.integers(1, 300))
        out.append(min(c, n - sum(out)))
    return out


def run_chunks(process: Callable[[Any], Any], x: NDArray[Any], chunks: List[int]) -> NDArray[Any]:
    out, at = [], 0
    for c in chunks:
        out.append(process(x[at : at + c]))
        at += c
    return np.concatenate(out)


# (btype, freq, order, rate) and scipy's design of the same filter
CASES = [
    ("lowpass", 300.0, 4, 30_000.0),
    ("highpass", 300.0, 3, 30_000.0),
    ("bandpass", (150.0, 250.0), 3, 1250.0),
    ("bandpass", (8.0, 12.0), 2, 250.0),
    ("notch", 50.0, 2, 1000.0),
]


def scipy_sos(btype: str, freq: Any, order: int, rate: float) -> NDArray[np.float64]:
    if btype == "notch":
        b, a = signal.iirnotch(freq, 30.0, fs=rate)
        return np.concatenate([b, a])[None, :]
    return signal.butter(order, freq, btype=btype, output="sos", fs=rate)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_design_is_scipys(case: Tuple[str, Any, int, float]) -> None:
    btype, freq, order, rate = case
    f = dsp.SosFilter(5, rate, btype, freq, order=order)
    want = scipy_sos(*case)
    assert f.sections.shape == want.shape
    np.testing.assert_allclose(f.sections, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["ones", "mixed", "whole"])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_filter_chunk_by_chunk_equals_sosfilt_with_carried_zi(
    case: Tuple[str, Any, int, float], kind: str, dtype: Any
) -> None:
    btype, freq, order, rate = case
    n, ch = 3000 if kind != "ones" else 800, 5
    x = make_input(n, ch, rate).astype(dtype)
    chunks = chunking(n, kind)
    sos = scipy_sos(*case).astype(dtype)
    zi = np.zeros((sos.shape[0], 2, ch), dtype=dtype)
    want = []
    at = 0
    for c in chunks:
        y, zi = signal.sosfilt(sos, x[at : at + c], axis=0, zi=zi)
        assert y.dtype == dtype
        want.append(y)
        at += c
    ref = np.concatenate(want)

    f = dsp.SosFilter(ch, rate, btype, freq, order=order)
    seen: List[Tuple[Any, Tuple[int, ...]]] = []

    def process(chunk: NDArray[Any]) -> NDArray[Any]:
        y = f.process(chunk)
        seen.append((y.dtype, y.shape == chunk.shape))
        return y

    got = run_chunks(process, x, chunks)
    assert all(d == dtype and same for d, same in seen)
    scale = np.abs(ref).max()
    worst = np.abs(got.astype(np.float64) - ref.astype(np.float64)).max()
    assert worst <= TOL[dtype] * scale, f"largest difference {worst:e}, scale {scale}"


def test_filter_on_chunks_pulled_from_a_stream_equals_offline(stream_name: str) -> None:
    """Written in chunks of one size, pulled in chunks of others, filtered as pulled: the
    same as filtering the whole signal at once, in rtloop and in scipy."""
    rate, ch, n = 1000.0, 4, 5000
    x = make_input(n, ch, rate, seed=11).astype(np.float32)
    stream = rtloop.Stream.create(stream_name, n_channels=ch, dtype="float32", sfreq=rate)
    filtered: List[NDArray[np.float32]] = []
    pulled: List[NDArray[np.float32]] = []
    f = dsp.SosFilter(ch, rate, "bandpass", (20.0, 120.0), order=4)
    sizes = [1, 3, 64, 1, 250, 17]
    with stream.reader() as reader, stream.writer() as writer:
        at, k = 0, 0
        for start in range(0, n, 333):
            writer.push_chunk(x[start : start + 333])
            while reader.available:
                data, _ = reader.pull_chunk(max_samples=sizes[k % len(sizes)])
                k += 1
                assert data.dtype == np.float32 and data.shape[1] == ch
                pulled.append(data)
                filtered.append(f.process(data))
                at += len(data)
        assert at == n
    assert min(len(p) for p in pulled) == 1
    np.testing.assert_array_equal(np.concatenate(pulled), x)
    got = np.concatenate(filtered)
    whole = dsp.SosFilter(ch, rate, "bandpass", (20.0, 120.0), order=4).process(x)
    np.testing.assert_array_equal(got, whole)
    sos = signal.butter(4, (20.0, 120.0), btype="bandpass", output="sos", fs=rate)
    ref = signal.sosfilt(sos.astype(np.float32), x, axis=0)
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["average", "median"])
@pytest.mark.parametrize("reference", [None, [0, 2, 3, 6], [1, 4, 5]])
def test_reref_equals_numpy(dtype: Any, kind: str, reference: Any) -> None:
    ch = 7
    x = make_input(500, ch, 1000.0).astype(dtype)
    refs = list(range(ch)) if reference is None else reference
    pick = x[:, refs].astype(np.float64)
    r = pick.mean(axis=1) if kind == "average" else np.median(pick, axis=1)
    want = x.astype(np.float64) - r[:, None]
    block = dsp.Reref(ch, reference, kind)
    assert block.delay_samples == 0
    got = run_chunks(block.process, x, chunking(500, "mixed"))
    assert got.dtype == dtype and got.shape == x.shape
    tol = 1e-12 if dtype == np.float64 else 1e-5
    assert np.abs(got - want).max() <= tol * np.abs(x).max()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_spikes_are_found_on_their_channel_at_their_sample(dtype: Any) -> None:
    rng = np.random.default_rng(5)
    n, ch = 8000, 4
    x = rng.random((n, ch)) - 0.5  # median |x| 0.25
    # (channel, peak sample): 500 is before the first noise estimate (noise_window 1000);
    # 3010 is inside 3000's refractory period on the same channel; 3005 is on another
    spikes = [(0, 500), (0, 1500), (2, 2200), (0, 3000), (0, 3010), (3, 3005), (1, 4500), (2, 7000)]
    for c, at in spikes:
        x[at - 2 : at + 3, c] += [-2.0, -6.0, -9.0, -6.0, -2.0]
    x = x.astype(dtype)
    d = dsp.SpikeDetector(ch, noise_window=1000, peak_window=20, refractory=30, k=5.0)
    assert d.delay_samples == 20
    assert np.isinf(d.thresholds).all()
    found = run_chunks(d.process, x, chunking(n, "mixed"))
    assert found.dtype.names == ("channel", "sample", "peak")
    assert found["channel"].dtype == np.int64 and found["peak"].dtype == dtype
    got = sorted(zip(found["channel"].tolist(), found["sample"].tolist()))
    assert got == [(0, 1500), (0, 3000), (1, 4500), (2, 2200), (2, 7000), (3, 3005)]
    np.testing.assert_array_equal(found["peak"], x[found["sample"], found["channel"]])
    want = 5.0 * 0.25 / 0.6745
    assert np.all(np.abs(d.thresholds - want) < 0.1 * want)
    # nothing for a chunk without spikes: an empty array of the same fields
    quiet = d.process(np.zeros((10, ch), dtype))
    assert len(quiet) == 0 and quiet.dtype.names == ("channel", "sample", "peak")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_envelope_equals_numpys_moving_rms(dtype: Any) -> None:
    ch, n, w = 3, 2000, 25
    x = make_input(n, ch, 1000.0).astype(dtype)
    b = dsp.MovingRms(ch, w)
    assert b.delay_samples == (w - 1) / 2
    got = run_chunks(b.process, x, chunking(n, "mixed"))
    sq = np.concatenate([np.zeros((w - 1, ch)), x.astype(np.float64) ** 2])
    c = np.cumsum(sq, axis=0)
    c = np.concatenate([np.zeros((1, ch)), c])
    want = np.sqrt((c[w:] - c[:-w]) / w)
    assert got.dtype == dtype
    assert np.abs(got - want).max() <= TOL[dtype] * 10 * want.max()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("factor", [2, 5])
def test_decimation_equals_scipy_filter_then_keep(dtype: Any, factor: int) -> None:
    ch, n = 3, 3001
    x = make_input(n, ch, 1000.0).astype(dtype)
    d = dsp.Decimator(ch, factor)
    got = run_chunks(d.process, x, chunking(n, "mixed"))
    sos = signal.butter(8, 0.8 / factor, output="sos")
    want = signal.sosfilt(sos, x.astype(np.float64), axis=0)[::factor]
    assert got.dtype == dtype and got.shape == want.shape
    assert np.abs(got - want).max() <= TOL[dtype] * 10 * np.abs(want).max()
    w, gd = signal.group_delay(signal.sos2tf(sos), w=[1e-4])
    assert d.delay_samples == pytest.approx(gd[0], rel=1e-3)


def test_filter_delay_is_scipys_group_delay() -> None:
    rate = 1000.0
    f = dsp.SosFilter(2, rate, "bandpass", (30.0, 60.0), order=3)
    centre = np.sqrt(30.0 * 60.0)
    _, gd = signal.group_delay(signal.sos2tf(f.sections), w=[centre], fs=rate)
    assert f.delay_samples == pytest.approx(gd[0], rel=1e-6)
    _, gd = signal.group_delay(signal.sos2tf(f.sections), w=[45.0], fs=rate)
    assert f.delay_at(45.0) == pytest.approx(gd[0], rel=1e-6)


def test_ripples_are_detected_during_a_burst() -> None:
    rate, ch, n = 1250.0, 2, int(1250 * 6)
    rng = np.random.default_rng(9)
    x = rng.normal(0.0, 1.0, (n, ch))
    onset, length = int(4.0 * rate), int(0.08 * rate)
    t = np.arange(length) / rate
    x[onset : onset + length, 1] += 8.0 * np.sin(2 * np.pi * 200.0 * t)
    d = dsp.RippleDetector(ch, rate)
    found = run_chunks(d.process, x.astype(np.float32), chunking(n, "mixed"))
    assert found.dtype.names == ("channel", "onset", "detected")
    assert found["channel"].tolist() == [1]
    assert onset <= found["onset"][0] <= found["detected"][0] < onset + length + d.delay_samples


def test_phase_triggers_land_at_the_target_phase() -> None:
    rate, n = 250.0, 2500
    t = np.arange(n) / rate
    x = np.sin(2 * np.pi * 10.0 * t)[:, None]  # phase 0 (cosine peak) at sin's peak - pi/2
    p = dsp.PhaseTracker(1, rate, (8.0, 12.0), 125, target=0.0, refractory=10)
    assert p.delay_samples == 0.0
    found = run_chunks(p.process, x, chunking(n, "mixed"))
    assert found.dtype.names == ("channel", "sample", "phase")
    assert len(found) >= 35  # 10 cycles a second over 10 s, from the first full window
    true_phase = 2 * np.pi * 10.0 * found["sample"] / rate - np.pi / 2
    err = np.angle(np.exp(1j * true_phase))
    assert np.abs(err).max() < 0.3
    phase, amp = p.latest
    assert phase.shape == (1,) and amp[0] > 0.5


# --- errors ------------------------------------------------------------------------------

BAD_PARAMETERS = [
    (lambda: dsp.SosFilter(4, 1000.0, "lowpass", 600.0),
     "cutoff 600 Hz: must lie strictly between 0 and the Nyquist frequency 500 Hz"),
    (lambda: dsp.SosFilter(4, 1000.0, "lowpass", 100.0, order=0),
     "order 0: a Butterworth filter's order must be 1 to 12"),
    (lambda: dsp.SosFilter(4, 1000.0, "highpass", 100.0, order=13),
     "order 13: a Butterworth filter's order must be 1 to 12"),
    (lambda: dsp.SosFilter(4, 1000.0, "bandpass", (250.0, 150.0)),
     "band 250..150 Hz: the low edge must be below the high edge"),
    (lambda: dsp.SosFilter(4, 1000.0, "bandpass", 100.0), "freq=(low, high)"),
    (lambda: dsp.SosFilter(4, 1000.0, "notch", 50.0, q=0.0),
     "notch q 0: give a finite q > 0"),
    (lambda: dsp.SosFilter(4, 1000.0, "notch", 50.0, order=4),
     "a notch is a second-order filter: give order 2"),
    (lambda: dsp.SosFilter(4, float("nan"), "lowpass", 1.0),
     "sample rate NaN Hz: give a finite rate > 0"),
    (lambda: dsp.SosFilter(4, 1000.0, "band", 1.0),
     "'btype' parameter. Allowed values are \"lowpass\", \"highpass\", \"bandpass\", \"notch\""),
    (lambda: dsp.SosFilter(0, 1000.0, "lowpass", 100.0), "a filter needs at least one channel"),
    (lambda: dsp.SosFilter(-1, 1000.0, "lowpass", 100.0),
     "'channels' parameter. Allowed values are whole numbers >= 0"),
    (lambda: dsp.Reref(0), "a re-reference needs at least one channel"),
    (lambda: dsp.Reref(4, []),
     "the reference channels are empty: name at least one of the 4 channels"),
    (lambda: dsp.Reref(4, [1, 4]), "reference channel 4: channels are 0 to 3"),
    (lambda: dsp.Reref(4, [1, 1]), "reference channel 1 is named twice: name each once"),
    (lambda: dsp.Reref(4, [-1]), "'reference' parameter. Allowed values are whole numbers >= 0"),
    (lambda: dsp.Reref(4, kind="mean"), "Allowed values are \"average\", \"median\""),
    (lambda: dsp.SpikeDetector(0, noise_window=10, peak_window=1, refractory=0),
     "spike detection needs at least one channel"),
    (lambda: dsp.SpikeDetector(2, noise_window=10, peak_window=1, refractory=0, k=-1.0),
     "threshold k = -1: give a finite number of noise sigmas > 0 (typically 4 to 6)"),
    (lambda: dsp.SpikeDetector(2, noise_window=0, peak_window=1, refractory=0),
     "the noise window must be at least 1 sample"),
    (lambda: dsp.SpikeDetector(2, noise_window=10, peak_window=0, refractory=0),
     "the peak window must be at least 1 sample"),
    (lambda: dsp.SpikeDetector(2, noise_window=10, peak_window=1, refractory=0, sign="up"),
     "Allowed values are \"negative\", \"positive\", \"both\""),
    (lambda: dsp.MovingRms(0, 5), "channels must be at least 1"),
    (lambda: dsp.MovingRms(2, 0), "the window (samples) must be at least 1"),
    (lambda: dsp.Decimator(2, 1), "decimation factor 1: give a whole factor of 2 or more"),
    (lambda: dsp.Decimator(0, 2), "a filter needs at least one channel"),
    (lambda: dsp.RippleDetector(2, 1250.0, z_start=1.0, z_end=3.0),
     "z_start 1 and z_end 3: give finite thresholds with z_end <= z_start"),
    (lambda: dsp.RippleDetector(2, 1250.0, band=(150.0, 700.0)),
     "ripple band: high edge 700 Hz: must lie strictly between 0 and the Nyquist frequency 625 Hz"),
    (lambda: dsp.RippleDetector(2, 1250.0, min_duration=0),
     "min_duration (samples) must be at least 1"),
    (lambda: dsp.RippleDetector(0, 1250.0), "channels must be at least 1"),
    (lambda: dsp.PhaseTracker(1, 250.0, (8.0, 12.0), 10),
     "window of 10 samples: it must hold at least one cycle of 8 Hz (32 samples at 250 Hz)"),
    (lambda: dsp.PhaseTracker(1, 250.0, (8.0, 70.0), 125),
     "band high edge 70 Hz: the phase tracker follows bands below a quarter of the rate (62.5 Hz)"),
    (lambda: dsp.PhaseTracker(1, 250.0, (8.0, 12.0), 125, target=float("nan")),
     "the target phase must be a finite number"),
    (lambda: dsp.PhaseTracker(0, 250.0, (8.0, 12.0), 125),
     "phase estimation needs at least one channel"),
]


@pytest.mark.parametrize("make, message", BAD_PARAMETERS)
def test_bad_parameters_say_what_is_allowed(make: Callable[[], Any], message: str) -> None:
    with pytest.raises(ValueError) as e:
        make()
    assert message in str(e.value)


BLOCKS = {
    "SosFilter": lambda: dsp.SosFilter(4, 1000.0, "lowpass", 100.0),
    "Reref": lambda: dsp.Reref(4),
    "SpikeDetector": lambda: dsp.SpikeDetector(4, noise_window=10, peak_window=2, refractory=3),
    "MovingRms": lambda: dsp.MovingRms(4, 5),
    "Decimator": lambda: dsp.Decimator(4, 3),
    "RippleDetector": lambda: dsp.RippleDetector(4, 1250.0),
    "PhaseTracker": lambda: dsp.PhaseTracker(4, 250.0, (8.0, 12.0), 125),
}


@pytest.mark.parametrize("name", list(BLOCKS))
def test_bad_chunks_say_what_is_allowed(name: str) -> None:
    b = BLOCKS[name]()
    with pytest.raises(TypeError) as e:
        b.process([[0.0] * 4])
    allowed = f"{name}: a chunk is a numpy array shaped (samples, 4) of float32 or float64"
    assert allowed in str(e.value)
    assert "but got a value of type list instead" in str(e.value)
    with pytest.raises(TypeError) as e:
        b.process(np.zeros((3, 4), np.int16))
    assert "of float32 or float64" in str(e.value) and "but got dtype int16" in str(e.value)
    with pytest.raises(ValueError) as e:
        b.process(np.zeros(4, np.float32))
    assert "but got an array of shape (4,) (1 dimensions)" in str(e.value)
    assert "one sample x is x[None, :]" in str(e.value)
    with pytest.raises(ValueError) as e:
        b.process(np.zeros((3, 5), np.float32))
    assert f"{name} was made for 4 channels, but the chunk has 5 (shape (3, 5))" in str(e.value)
    # a strided view (every other row) is a chunk too
    b.process(np.zeros((8, 4), np.float32)[::2])


@pytest.mark.parametrize("name", ["SosFilter", "Reref", "SpikeDetector", "MovingRms", "Decimator"])
def test_a_block_keeps_the_dtype_of_its_first_chunk_until_reset(name: str) -> None:
    b = BLOCKS[name]()
    b.process(np.zeros((3, 4), np.float32))
    with pytest.raises(TypeError) as e:
        b.process(np.zeros((3, 4), np.float64))
    assert f"{name} runs in float32 since its first chunk (its state is float32)" in str(e.value)
    assert "call reset() first" in str(e.value)
    b.reset()
    b.process(np.zeros((3, 4), np.float64))


def test_either_dtype_for_the_float64_blocks() -> None:
    for name in ["RippleDetector", "PhaseTracker"]:
        b = BLOCKS[name]()
        b.process(np.zeros((3, 4), np.float32))
        b.process(np.zeros((3, 4), np.float64))


def test_reset_starts_afresh() -> None:
    x = make_input(400, 4, 1000.0)
    f = dsp.SosFilter(4, 1000.0, "lowpass", 100.0)
    first = f.process(x)
    f.reset()
    np.testing.assert_array_equal(f.process(x), first)


def test_delay_at_refuses_frequencies_outside_the_band() -> None:
    f = dsp.SosFilter(1, 1000.0, "lowpass", 100.0)
    with pytest.raises(ValueError) as e:
        f.delay_at(600.0)
    assert "Allowed values are 0 to the Nyquist frequency 500 Hz, but got 600 instead" in str(
        e.value
    )


def test_non_contiguous_chunks_are_read_by_their_strides() -> None:
    x = make_input(300, 8, 1000.0)
    view = x[:, ::2]  # every other column: not C-contiguous
    a = dsp.SosFilter(4, 1000.0, "lowpass", 100.0).process(view)
    b = dsp.SosFilter(4, 1000.0, "lowpass", 100.0).process(np.ascontiguousarray(view))
    np.testing.assert_array_equal(a, b)
    fortran = np.asfortranarray(x[:, :4])
    c = dsp.SosFilter(4, 1000.0, "lowpass", 100.0).process(fortran)
    d = dsp.SosFilter(4, 1000.0, "lowpass", 100.0).process(np.ascontiguousarray(x[:, :4]))
    np.testing.assert_array_equal(c, d)


def test_band_edges_are_any_sequence_of_two() -> None:
    """A list or an array of two edges is a band as a tuple is (freq=, band=)."""
    x = make_input(300, 2, 1000.0)
    want = dsp.SosFilter(2, 1000.0, "bandpass", (30.0, 60.0)).process(x)
    for edges in ([30.0, 60.0], np.array([30.0, 60.0])):
        got = dsp.SosFilter(2, 1000.0, "bandpass", edges).process(x)
        np.testing.assert_array_equal(got, want)
    assert dsp.RippleDetector(2, 1250.0, band=[150.0, 250.0]).delay_samples == pytest.approx(
        dsp.RippleDetector(2, 1250.0).delay_samples
    )
    dsp.PhaseTracker(1, 250.0, [8.0, 12.0], 125)
    for make in (
        lambda: dsp.RippleDetector(2, 1250.0, band=(150.0, 200.0, 250.0)),
        lambda: dsp.PhaseTracker(1, 250.0, 10.0, 125),
    ):
        with pytest.raises(ValueError) as e:
            make()
        assert "'band' parameter. A band takes its edges band=(low, high) in Hz" in str(e.value)


@pytest.mark.parametrize("name", list(BLOCKS))
def test_process_lets_other_threads_run(name: str) -> None:
    """With a switch interval of an hour, the interpreter never takes the GIL from the main
    thread by force: a waiting thread runs only if `process` lets the GIL go. It does, so
    the thread gets to run while the main thread calls nothing but `process`."""
    import sys
    import threading

    b = BLOCKS[name]()
    chunk = make_input(2000, 4, 1000.0).astype(np.float32)
    go, ran = threading.Event(), threading.Event()

    def other() -> None:
        go.wait()  # blocks (the GIL released) until the main thread sets go
        ran.set()

    before = sys.getswitchinterval()
    sys.setswitchinterval(3600.0)
    try:
        t = threading.Thread(target=other)
        t.start()
        go.set()  # `other` now waits for the GIL, which the main thread holds
        # the control: Python code that keeps the GIL does not let it run
        for _ in range(200):
            sum(range(2000))
        held = not ran.is_set()
        calls = 0
        # without a release, `ran` is never set and every call is made; with one, the other
        # thread runs at the first release it is scheduled in
        while not ran.is_set() and calls < 20_000:
            b.process(chunk)
            calls += 1
        # read before join(), which lets the other thread run in any case
        released = ran.is_set()
    finally:
        sys.setswitchinterval(before)
        go.set()
    t.join()
    assert held, "the other thread ran while the main thread held the GIL"
    assert released, f"no other thread ran during {calls} calls of {name}.process"


# the data a writer process writes and the test recomputes: noise on 8 channels at 30 kHz
# with spikes of known channel and sample, and a common signal on every channel
GENERATE = """
import numpy as np
def generate():
    rng = np.random.default_rng(23)
    n, ch = 90_000, 8
    x = rng.normal(0.0, 10.0, (n, ch))
    x += 50.0 * np.sin(2 * np.pi * 50.0 * np.arange(n) / 30000.0)[:, None]
    spikes = [(1, 31_000), (5, 40_000), (2, 52_345), (7, 60_000), (0, 75_000), (5, 88_000)]
    for c, at in spikes:
        x[at - 3 : at + 4, c] += [-30.0, -90.0, -160.0, -200.0, -150.0, -80.0, -20.0]
    return x, spikes
"""


def test_a_pipeline_on_chunks_pulled_from_another_process(
    stream_name: str, child: Callable[..., Any]
) -> None:
    """A writer process writes; this one pulls what comes (blocking, chunks as they come)
    and runs median reference, 300-6000 Hz band-pass, spike detection and decimation on
    each chunk: spikes at their channel and sample, and every output the same as the whole
    signal's run at once."""
    writer = child(
        GENERATE
        + """
import sys, rtloop
x, _ = generate()
s = rtloop.Stream.create(sys.argv[1], n_channels=8, dtype="float64", sfreq=30000.0)
print("ready", flush=True)
sys.stdin.readline()
# a loaded machine may hold the reader up: the writer waits for it, up to the test's timeout
with s.writer(timeout=120.0) as w:
    for i in range(0, len(x), 750):
        w.push_chunk(x[i : i + 750])
print("written", flush=True)
sys.stdin.readline()
""",
        stream_name,
    )
    writer.expect("ready")
    env: dict = {}
    exec(GENERATE, env)
    x, spikes = env["generate"]()
    n, ch = x.shape

    def blocks() -> List[Any]:
        return [
            dsp.Reref(ch, kind="median"),
            dsp.SosFilter(ch, 30000.0, "bandpass", (300.0, 6000.0), order=3),
            dsp.SpikeDetector(ch, noise_window=30000, peak_window=15, refractory=30),
            dsp.Decimator(ch, 30),
        ]

    def run(bs: List[Any], chunk: NDArray[Any]) -> Tuple[Any, Any, Any]:
        car, band, det, dec = bs
        y = band.process(car.process(chunk))
        return y, det.process(y), dec.process(chunk)

    stream = rtloop.Stream.open(stream_name)
    live = blocks()
    ys, events, slow = [], [], []
    # lossless: the writer waits for this reader, however loaded the machine
    with stream.reader("lossless") as reader:
        writer.send("go")
        got = 0
        while got < n:
            chunk, _ = reader.pull_chunk(max_samples=4096, timeout=30.0)
            assert len(chunk) > 0, "the writer process stopped writing"
            y, e, d = run(live, chunk)
            ys.append(y)
            events.append(e)
            slow.append(d)
            got += len(chunk)
    writer.expect("written")
    writer.send("end")
    assert writer.finish()[0] == 0

    found = np.concatenate(events)
    # each on its channel, its peak where the band-passed spike peaks: within 3 samples
    # (0.1 ms) of the injected one
    got = sorted(zip(found["sample"].tolist(), found["channel"].tolist()))
    want = sorted((at, c) for c, at in spikes)
    assert [c for _, c in got] == [c for _, c in want]
    assert all(abs(g - w) <= 3 for (g, _), (w, _) in zip(got, want)), (got, want)
    y, e, d = run(blocks(), x)
    np.testing.assert_array_equal(np.concatenate(ys), y)
    np.testing.assert_array_equal(found, e)
    np.testing.assert_array_equal(np.concatenate(slow), d)
    assert len(d) == n // 30
