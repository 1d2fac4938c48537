"""The worked closed loops of examples/closed-loop/, run as users run them
(`python examples/closed-loop/X/run.py`): a real `rtloop replay` into a real stream, a real
`rtloop run` of the example's model file, triggers on a real UDP socket (or feedback over a
real LSL outlet), and the figures the script prints held against the truth its input was made
from. Quality is asserted with margins; latencies are asserted to be measured and reported,
never to be small (the machine may be busy)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest

from _peers import need

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "closed-loop"


def run_example(name: str, tmp_path: Path, seconds: float, alone: Any) -> Tuple[str, Dict[str, Any]]:
    """Run examples/closed-loop/NAME/run.py briefly, with no other test running (`alone`: the
    conftest's `alone_on_the_machine`); its printed output and its figures."""
    figures = tmp_path / "figures.json"
    tag = uuid.uuid4().hex[:8]
    env = dict(os.environ, RTLOOP_PYTHON=sys.executable)
    # one closed loop at a time, and nothing else beside it: each is a replay and a model at
    # real-time priority and the script's own analysis; two at once on two vCPUs starved a
    # replay (185 samples arrived in 4 s), and other tests' real-time processes brought the
    # kernel's real-time throttling on it
    with alone():
        p = subprocess.run(
            [sys.executable, str(EXAMPLES / name / "run.py"), "--seconds", str(seconds), "--tag", tag,
             "--out", str(tmp_path / "out"), "--json", str(figures)],
            capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
        )
    assert p.returncode == 0, f"{p.stdout}\n{p.stderr}"
    return p.stdout, json.loads(figures.read_text())


def printed(out: str, pattern: str) -> Tuple[str, ...]:
    m = re.search(pattern, out)
    assert m, f"{pattern!r} not in the output:\n{out}"
    return m.groups()


def latency_reported(out: str, fig: Dict[str, Any], triggers: int) -> None:
    """Every trigger's latency was measured (but those whose sample was a held one, not in
    the file; few), none before its input, and the script printed the histogram's p50/p99."""
    lat = fig["latency_ticks"]
    assert lat["n"] + lat["not_found"] == triggers > 0
    assert lat["n"] >= 0.8 * triggers
    assert sum(lat["histogram"].values()) == lat["n"]
    assert min(int(k) for k in lat["histogram"]) >= 0, "a trigger cannot leave before its input arrived"
    p50, p99 = printed(out, r"latency in ticks over \d+ triggers: p50 (\S+), p99 (\S+),")
    assert (float(p50), float(p99)) == pytest.approx((lat["p50"], lat["p99"]), rel=1e-3)
    assert lat["p50"] <= lat["p99"]


@pytest.mark.alone
def test_spike_triggered_stimulation_on_a_replayed_spikeglx_recording(tmp_path: Path, alone_on_the_machine: Any) -> None:
    need("spikeinterface.core", "spikeinterface")
    need("pynwb", "pynwb")
    out, fig = run_example("spikes", tmp_path, seconds=4, alone=alone_on_the_machine)
    precision, recall, detectable = printed(out, r"precision (\S+), recall (\S+) of all units, recall (\S+) of the")
    assert float(recall) == pytest.approx(fig["recall"], abs=1e-3)
    assert float(precision) == pytest.approx(fig["precision"], abs=1e-3)
    assert float(detectable) == pytest.approx(fig["recall_detectable"], abs=1e-3)
    assert fig["true_spikes"] > 100
    # the units deeper than the threshold are found; the generator's faintest unit (about 3
    # noise sigmas) mostly is not, which the recall of all units shows
    assert fig["recall_detectable"] > 0.8 and fig["precision"] > 0.85, out
    assert sum(u["snr"] >= 5 for u in fig["units"].values()) >= 3
    # every event the detector logged left as a datagram the listener received
    assert fig["datagrams"] == fig["events_logged"] > 0, out
    latency_reported(out, fig, fig["datagrams"])
    assert "rtloop view spike-loop-" in out


@pytest.mark.alone
def test_ripple_triggered_stimulation_on_synthetic_lfp(tmp_path: Path, alone_on_the_machine: Any) -> None:
    need("pynwb", "pynwb")
    out, fig = run_example("ripples", tmp_path, seconds=5, alone=alone_on_the_machine)
    recall, precision = printed(out, r"recall ([\d.]+), precision ([\d.]+)")
    assert (float(recall), float(precision)) == pytest.approx((fig["recall"], fig["precision"]), abs=1e-3)
    assert fig["true_ripples"] >= 4
    assert fig["recall"] >= 0.7 and fig["precision"] >= 0.7, out
    assert fig["datagrams"] == fig["events_logged"] > 0, out
    latency_reported(out, fig, fig["datagrams"])


@pytest.mark.alone
def test_alpha_phase_locked_stimulation_on_eeg(tmp_path: Path, alone_on_the_machine: Any) -> None:
    need("pynwb", "pynwb")
    out, fig = run_example("alpha-phase", tmp_path, seconds=4, alone=alone_on_the_machine)
    mean_deg, spread_deg = printed(out, r"circular mean (\S+) deg, circular spread (\S+) deg")
    assert float(mean_deg) == pytest.approx(fig["phase_error_mean_rad"] * 180 / 3.141592653589793, abs=0.1)
    # triggers on most alpha cycles (the weakest stretches stay under min_amplitude), near the
    # peak: within 45 degrees on average, spread under 60 degrees (a random phase spreads
    # without bound)
    assert fig["triggers"] > 0.3 * fig["alpha_cycles"], out
    assert abs(fig["phase_error_mean_rad"]) < 0.8 and fig["phase_error_spread_rad"] < 1.05, out
    assert fig["datagrams"] == fig["events_logged"] > 0, out
    latency_reported(out, fig, fig["datagrams"])


@pytest.mark.alone
def test_alpha_band_power_neurofeedback_over_lsl(tmp_path: Path, alone_on_the_machine: Any) -> None:
    need("pylsl", "pylsl")
    need("pynwb", "pynwb")
    out, fig = run_example("neurofeedback", tmp_path, seconds=4, alone=alone_on_the_machine)
    (r,) = printed(out, r"true alpha amplitude over the samples each was computed from r = (\S+)")
    assert float(r) == pytest.approx(fig["correlation"], abs=1e-3)
    # LSL markers: an irregular-rate outlet of type Markers, one marker every 20 ticks
    assert (fig["lsl_type"], fig["lsl_rate"]) == ("Markers", 0.0)
    assert fig["values"] > 50
    assert fig["correlation"] > 0.85, out
    lat = fig["latency_ticks"]
    # every value received has its latency, none before its input
    assert lat["n"] == fig["received"] > 0
    assert min(int(k) for k in lat["histogram"]) >= 0
    p50, p99 = printed(out, r"input-to-feedback latency in ticks over \d+ values: p50 (\S+), p99 (\S+),")
    assert (float(p50), float(p99)) == pytest.approx((lat["p50"], lat["p99"]), rel=1e-3)


def load_example(name: str) -> Any:
    """examples/closed-loop/NAME/run.py as a module (its main not run)."""
    import importlib.util

    sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(f"ex_{uuid.uuid4().hex}", EXAMPLES / name / "run.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_neurofeedback_quality_does_not_depend_on_where_in_the_file_the_run_begins() -> None:
    """The replay starts before the model, so a run begins wherever the file has got to by
    then, later on a loaded machine. The example used to correlate each feedback value with the
    true amplitude at its own sample; a moving RMS over 0.25 s behind a band-pass lags that by
    about 0.2 s, and how much that costs depended on how fast the amplitude changed in the part
    of the file played: r = 0.30 in a CI run. Here the model's pipeline is run offline (rtloop's
    band-pass, the envelope's moving RMS, the marker's mean over O1 and O2) on ticks that begin
    at several places in the file, one of them with a gap of 300 samples as a loaded machine
    leaves; what the example compares against now, the true amplitude over the samples each value
    was computed from, is tracked closely everywhere; the amplitude at the tick's own sample is not."""
    import numpy as np
    import rtloop.dsp as dsp

    nf = load_example("neurofeedback")
    cl = sys.modules["closedloop"]
    eeg, _, amplitude = cl.make_eeg(14, nf.RATE, seed=23)
    worst_old, worst_new = 1.0, 1.0
    for start in range(0, 9000, 1000):
        at = start + np.arange(4000)
        at[2000:] += 300 if start == 4000 else 0  # the gap: 300 samples never reached the model
        rows = eeg[at]
        band = dsp.SosFilter(2, nf.RATE, "bandpass", (8.0, 12.0), order=2).process(rows)
        rms = np.sqrt(np.stack([np.convolve(band[:, c] ** 2, np.ones(nf.WINDOW) / nf.WINDOW)[: len(at)] for c in range(2)], 1))
        ticks = np.arange(len(at))
        tmap = cl.TickMap(ticks, rows.reshape(-1, 1, 2), eeg)
        assert tmap.skipped_samples == (300 if start == 4000 else 0)
        marks = np.arange(nf.WARMUP_TICKS, len(at), 20)
        value = rms[marks].mean(axis=1)
        truth = np.array([nf.window_truth(tmap, t, amplitude) for t in marks])
        assert not np.isnan(truth).any()
        worst_new = min(worst_new, float(np.corrcoef(value, truth)[0, 1]))
        worst_old = min(worst_old, float(np.corrcoef(value, amplitude[at[marks]])[0, 1]))
    assert worst_new > 0.9, worst_new
    assert worst_old < 0.5, worst_old


def test_the_spike_example_keeps_its_threshold_through_a_stalled_input() -> None:
    """When the replay stalls, the example's jitter buffer holds the last sample, which comes
    out of the band-pass as a flat line. The detector counted those values as noise: a stall
    over most of its 0.5 s noise window pulled the threshold to almost nothing, and every
    noise sample crossed it for the next 0.5 s (a CI run's precision fell to 0.39-0.67 after
    such stalls). Here the model's pipeline (median reference, band-pass, spike detection, as
    model.yaml sets them) runs offline on a SpikeInterface recording whose input is held for
    50, 150 and 300 ms and 2.5 s at 3 s, and for 300 and 467 ms at the start (before the first
    noise estimate), the file's samples of the stall skipped as the jitter buffer does: each
    channel's threshold stays within 15 % of the run without a stall, or is infinite (nothing
    detected) where the stall filled the windows before it too long for any estimate, and the
    events that match no true spike are no more than in that run. On the old code a 150 ms
    stall left thresholds at 0.49 of the clean run's and 364 events that match no spike (0
    without the stall), a 300 ms one thresholds at 4e-7 of them and 5,531 such events; with
    the fix's second version (no repeats left out) 2.5 s at 3 s gave 5,291 and 467 ms from
    17 ms 6,056."""
    import numpy as np
    import rtloop.dsp as dsp

    si = need("spikeinterface.core", "spikeinterface")

    rate = 30000
    rec, sorting = si.generate_ground_truth_recording(
        durations=[8.0], sampling_frequency=float(rate), num_channels=16, num_units=5, seed=17
    )
    uv = rec.get_traces().astype(np.float32)
    truth = np.sort(np.concatenate([sorting.get_unit_spike_train(u) for u in sorting.unit_ids]))
    window = 15000

    def run(stall_at: int, held: int) -> Tuple[Any, int]:
        at = np.arange(len(uv))
        at = np.concatenate([at[:stall_at], np.full(held, stall_at - 1), at[stall_at + held :]])
        reref = dsp.Reref(16, kind="median")
        band = dsp.SosFilter(16, rate, "bandpass", (300.0, 6000.0), order=2)
        det = dsp.SpikeDetector(16, noise_window=15000, peak_window=15, refractory=30, k=5.0, sign="negative")
        thresholds, false = [], 0
        x = uv[at]
        for i in range(0, len(x), 30):  # one tick: 30 samples
            events = det.process(band.process(reref.process(x[i : i + 30])))
            for s in at[events["sample"]]:
                near = truth[np.searchsorted(truth, s - 60) : np.searchsorted(truth, s + 31)]
                # a trough comes up to 2 ms after the spike's time; the stall's edges ring
                if s >= 15000 and len(near) == 0 and not stall_at - 60 <= s < stall_at + held + 90:
                    false += 1
            if (i + 30) % 15000 == 0:
                thresholds.append(det.thresholds.copy())
        return np.array(thresholds), false

    clean, clean_false = run(0, 0)
    assert np.isfinite(clean).all()
    later = 3 * rate + 1000
    for stall_at, held in ((later, 1500), (later, 4500), (later, 9000), (later, 75000), (3000, 9000), (500, 14000)):
        thresholds, false = run(stall_at, held)

        def mostly_held(w: int) -> bool:
            return min(stall_at + held, (w + 1) * window) - max(stall_at, w * window) > 0.75 * window

        first = next((w for w in range(len(clean)) if mostly_held(w)), None)
        for w, (t, c) in enumerate(zip(thresholds, clean)):
            # nothing detected is right from the fourth mostly held window in a row (the
            # detector keeps its threshold for three), and before any estimate
            off = (first is not None and w >= first + 3 and mostly_held(w)) or all(mostly_held(v) for v in range(w + 1))
            ok = (np.abs(t / c - 1) < 0.15) | (off & np.isinf(t))
            assert ok.all(), (stall_at, held, w, t / c)
        assert false <= clean_false + 2, (stall_at, held, false, clean_false)


def jitter_buffer(depth: int, rows: int, width: int) -> Any:
    """The examples' jitter buffer module, loaded fresh, after its init."""
    import importlib.util
    from types import SimpleNamespace

    spec = importlib.util.spec_from_file_location(f"jb_{uuid.uuid4().hex}", EXAMPLES / "jitter_buffer.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.init(SimpleNamespace(outputs={"out": SimpleNamespace(shape=(rows, width))}), depth=depth, gain=1.0)
    return mod


def test_the_jitter_buffer_gives_every_sample_once_however_it_arrives() -> None:
    """What stream_in's fixed signal does not: samples arriving 0 to 3 ticks' worth at a time
    come out `rows` a tick, each once, in order, `depth` ticks behind."""
    import numpy as np
    rows, width, depth = 3, 2, 3
    mod = jitter_buffer(depth, rows, width)
    source = np.arange(600 * width, dtype=np.float32).reshape(-1, width)
    # arrivals in bursts of 0 to 3 ticks' worth, 3 samples a tick on average
    sizes = [0, 6, 0, 3, 0, 9, 3, 0, 3, 3, 3, 0, 6, 0, 3, 9] * 12
    at, out = 0, []
    for n in sizes:
        n = min(n, len(source) - at)
        chunk = source[at : at + n]
        at += n
        buf = np.empty((rows, width), dtype=np.float32)
        mod.step(chunk, buf)
        out.append(buf.copy())
    got = np.concatenate(out)
    assert mod.STATE[2] == 0 and mod.STATE[4] == 0, "never ran dry, dropped nothing"
    first = int(np.flatnonzero((got == source[0]).all(axis=1))[0])
    assert (got[:first] == 0).all(), "held zeros until depth ticks of samples were queued"
    released = got[first:]
    np.testing.assert_array_equal(released, source[: len(released)])


def test_the_jitter_buffer_holds_when_dry_and_drops_a_backlog() -> None:
    import numpy as np
    rows, width, depth = 2, 1, 2
    mod = jitter_buffer(depth, rows, width)
    source = np.arange(1, 200, dtype=np.float32).reshape(-1, 1)
    buf = np.empty((rows, width), dtype=np.float32)
    mod.step(source[:4], buf)  # primed: 2 ticks queued; releases samples 1, 2
    np.testing.assert_array_equal(buf[:, 0], [1, 2])
    mod.step(source[:0], buf)  # nothing new: releases 3, 4
    np.testing.assert_array_equal(buf[:, 0], [3, 4])
    mod.step(source[:0], buf)  # dry: the last sample held, counted
    np.testing.assert_array_equal(buf[:, 0], [4, 4])
    assert mod.STATE[2] == 1 and mod.STATE[3] == 2
    # a backlog after a stall: 20 samples at once; the oldest go so that 2 ticks stay queued
    mod.step(source[4:24], buf)
    assert mod.STATE[4] == 20 - 2 * rows
    np.testing.assert_array_equal(buf[:, 0], [21, 22])
