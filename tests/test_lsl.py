"""The LSL bridge against a real peer: pylsl (from PyPI, bundling liblsl 1.18) outlets and
inlets on this machine, `rtloop bridge lsl-in` / `lsl-out` as processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, List

import numpy as np
import pytest

import rtloop

from _lsl_probe import push_until_flowing, without_probes
from _peers import need

pylsl = need("pylsl", "pylsl")

pytestmark = pytest.mark.timeout(120)


def uname(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def bridge(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rtloop", "bridge", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.kill()
    p.communicate()  # closes the pipes


def wait_ready(p: subprocess.Popen) -> str:
    """The bridge prints one `bridging ...` line on stderr when it is ready."""
    assert p.stderr is not None
    seen = []
    while True:
        line = p.stderr.readline()
        if not line:
            raise AssertionError("the bridge ended before it was ready:\n" + "".join(seen))
        if line.startswith("bridging"):
            return line
        seen.append(line)  # liblsl's own log lines


def written(name: str) -> int:
    """Samples written to stream `name` so far, 0 while it does not exist yet."""
    try:
        return rtloop.Stream.open(name).written
    except rtloop.StreamNotFoundError:
        return 0


def outlet(name: str, fmt: str, n_ch: int, rate: float, kind: str = "EEG"):
    info = pylsl.StreamInfo(name, kind, n_ch, rate, fmt, f"src-{name}")
    chans = info.desc().append_child("channels")
    for i in range(n_ch):
        ch = chans.append_child("channel")
        ch.append_child_value("label", f"C{i}")
        ch.append_child_value("unit", "microvolts")
    return pylsl.StreamOutlet(info)


@pytest.mark.parametrize(
    "fmt,dtype", [("float32", np.float32), ("int16", np.int16), ("double64", np.float64)]
)
def test_a_pylsl_outlet_arrives_bit_identical_with_its_metadata(fmt: str, dtype) -> None:
    name = uname("lslin")
    out = outlet(name, fmt, 8, 1000.0)
    p = bridge("lsl-in", name, "--stream", name, "--seconds", "6", "--keep")
    try:
        wait_ready(p)
        assert out.wait_for_consumers(10)
        rng = np.random.default_rng(1)
        data = (rng.standard_normal((2000, 8)) * 1000).astype(dtype)
        t0 = pylsl.local_clock()
        for i in range(0, 2000, 100):
            out.push_chunk(data[i : i + 100], t0 + i / 1000.0)
        stream = rtloop.Stream.open(name)
        deadline = time.time() + 20
        while stream.written < 2000 and time.time() < deadline:
            time.sleep(0.05)
        assert stream.written == 2000
        got, stamps = stream.reader().read(0, 2000)
        np.testing.assert_array_equal(got, data)
        assert stream.dtype == np.dtype(dtype)
        assert stream.ch_names == [f"C{i}" for i in range(8)]
        assert stream.ch_units == ["microvolts"] * 8
        assert stream.sfreq == 1000.0
        # LSL's type and source id are the stream's: found as resolve_byprop would find it
        assert (stream.content_type, stream.source_id) == ("EEG", f"src-{name}")
        assert [i.name for i in rtloop.resolve_streams(type="EEG", source_id=f"src-{name}")] == [name]
        # LSL timestamps (local clock = CLOCK_MONOTONIC) became the samples' stamps; a
        # chunk's timestamp is its last sample's, earlier ones are 1/rate apart before it
        k = np.arange(2000)
        np.testing.assert_allclose(stamps, t0 + (k - 99) / 1000.0, atol=1e-4)
    finally:
        stop(p)
        if name in rtloop.Stream.list():
            rtloop.Stream.remove(name)


def test_an_rtloop_stream_arrives_in_a_pylsl_inlet_identical(make_name) -> None:
    name = make_name()
    s = rtloop.Stream.create(
        name, n_channels=4, dtype="float32", sfreq=500.0, capacity=10_000,
        ch_names=["Fz", "Cz", "Pz", "Oz"], ch_units=["uV"] * 4,
        content_type="EEG", source_id=f"amp-{name}",
    )
    w = s.writer()
    # no --type or --source-id: the outlet carries the stream's own
    # long enough for a loaded machine; the test stops it once the data came
    p = bridge("lsl-out", name, "--name", name, "--seconds", "60")
    try:
        wait_ready(p)
        found = pylsl.resolve_byprop("name", name, 1, 10)
        assert found, "the outlet is visible on the network"
        inlet = pylsl.StreamInlet(found[0])
        info = inlet.info(5)
        assert (info.channel_count(), info.nominal_srate(), info.type()) == (4, 500.0, "EEG")
        assert info.source_id() == f"amp-{name}"
        ch = info.desc().child("channels").child("channel")
        labels = []
        while not ch.empty():
            labels.append(ch.child_value("label"))
            ch = ch.next_sibling()
        assert labels == ["Fz", "Cz", "Pz", "Oz"]
        inlet.open_stream(5)
        probe = np.full((1, 4), -1, np.float32)
        push_until_flowing(w, inlet, probe)
        data = np.arange(4 * 1500, dtype=np.float32).reshape(1500, 4)
        for i in range(0, 1500, 50):
            w.push_chunk(data[i : i + 50])
        got: List[np.ndarray] = []
        n = 0
        deadline = time.time() + 20
        while n < 1500 and time.time() < deadline:
            chunk, ts = inlet.pull_chunk(timeout=0.5, max_samples=2000)
            if chunk:
                got.append(np.asarray(chunk, dtype=np.float32))
                n = len(without_probes(got, probe, np.float32))
        np.testing.assert_array_equal(without_probes(got, probe, np.float32), data)
    finally:
        stop(p)


def test_marker_streams_become_events() -> None:
    name = uname("markers")
    info = pylsl.StreamInfo(name, "Markers", 1, pylsl.IRREGULAR_RATE, "string", f"src-{name}")
    out = pylsl.StreamOutlet(info)
    p = bridge("lsl-in", name, "--stream", name, "--seconds", "5", "--keep")
    try:
        wait_ready(p)
        assert out.wait_for_consumers(10)
        for m in ["start", "stim 1", "stop"]:
            out.push_sample([m])
            time.sleep(0.05)
        stream = rtloop.Stream.open(name)
        deadline = time.time() + 10
        while stream.written < 3 and time.time() < deadline:
            time.sleep(0.05)
        r = stream.reader()
        events = [e for e in r.read_events(0, stream.reader().events_written) if e.type == "Markers"]
        assert [e.value for e in events] == ["start", "stim 1", "stop"]
        assert [e.sample for e in events] == [0, 1, 2]
    finally:
        stop(p)
        if name in rtloop.Stream.list():
            rtloop.Stream.remove(name)


def test_markers_keep_their_lsl_time_and_count_in_the_summary() -> None:
    """Each marker's event is stamped with the marker's LSL time (plus the time correction),
    not with the moment it reached the bridge, and the summary counts the samples the stream
    holds (one per marker). The markers are sent stamped 2 s in the past: an arrival stamp
    is then 2 s off whatever the machine's load."""
    name = uname("marktime")
    info = pylsl.StreamInfo(name, "Markers", 1, pylsl.IRREGULAR_RATE, "string", f"src-{name}")
    out = pylsl.StreamOutlet(info)
    p = bridge("lsl-in", name, "--stream", name, "--seconds", "60", "--keep")
    try:
        wait_ready(p)
        assert out.wait_for_consumers(10)
        sent = []
        for k in range(5):
            t = pylsl.local_clock() - 2.0
            out.push_sample([f"m{k}"], t)
            sent.append(t)
        deadline = time.monotonic() + 30
        while written(name) < 5:
            assert time.monotonic() < deadline, "the bridge never wrote the 5 markers"
            time.sleep(0.02)
        p.terminate()  # SIGTERM: the bridge stops cleanly and prints its summary
        summary, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        stream = rtloop.Stream.open(name)
        r = stream.reader()
        events = r.read_events(0, r.events_written)
        corr = [e.value for e in events if e.type == "lsl_time_correction"]
        corr0 = corr[-1] if corr else 0.0
        markers = [e for e in events if e.type == "Markers"]
        assert [e.value for e in markers] == [f"m{k}" for k in range(5)]
        # the correction between two clocks of one machine is microseconds; 1 ms is far
        # below the 2 s an arrival stamp would be off
        for e, t in zip(markers, sent):
            assert abs(e.timestamp - (t + corr0)) < 1e-3, (e.timestamp, t, corr0)
        assert stream.written == 5
        assert ": 5 samples, 5 events" in summary, summary
    finally:
        stop(p)
        if name in rtloop.Stream.list():
            rtloop.Stream.remove(name)


def test_no_matching_outlet_is_an_error_naming_what_was_found() -> None:
    other = uname("present")
    keep = outlet(other, "float32", 2, 100.0)
    p = bridge("lsl-in", uname("absent"), "--timeout", "1")
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0
    assert "no LSL outlet" in err and other in err, err
    del keep


def test_a_stream_lsl_cannot_carry_is_refused_with_the_reason(make_name) -> None:
    name = make_name()
    rtloop.Stream.create(name, n_channels=2, dtype="uint16", sfreq=100.0, capacity=1024)
    p = bridge("lsl-out", name, "--seconds", "1")
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0
    assert "uint16" in err and "int16" in err and "float32" in err, err


def test_a_vanished_outlet_is_reported_and_what_arrived_is_kept() -> None:
    name = uname("vanish")
    out = outlet(name, "float32", 2, 100.0)
    p = bridge("lsl-in", name, "--stream", name, "--seconds", "6", "--keep")
    try:
        wait_ready(p)
        assert out.wait_for_consumers(10)
        out.push_chunk(np.ones((200, 2), np.float32).tolist())
        # the peer disappears mid-stream, once what it sent is in (not after a sleep that a
        # loaded machine may outlast)
        deadline = time.monotonic() + 30
        while written(name) < 200:
            assert time.monotonic() < deadline, "the bridge never wrote the 200 samples"
            time.sleep(0.01)
        del out
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert "vanished or stalled" in err, err
        assert rtloop.Stream.open(name).written == 200
    finally:
        stop(p)
        if name in rtloop.Stream.list():
            rtloop.Stream.remove(name)


def _run_model(path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rtloop", "--json", "run", str(path), "--quiet", *args],
        cwd=Path(path).parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_runtime_lsl_out_sink_publishes_a_signal(tmp_path) -> None:
    name = uname("rtout").replace("-", "")
    model = tmp_path / "m.yaml"
    model.write_text(
        f"config: {{name: {name}}}\n"
        "signals:\n  raw: {shape: [10, 4], dtype: float32}\n"
        "sources:\n  gen: {driver: synthetic, out: [raw], options: {waveform: noise, amplitude: 5, seed: 4}}\n"
        "sinks:\n"
        f"  lsl: {{driver: lsl_out, in: [raw], options: {{name: {name}, type: EEG}}}}\n"
        f"  copy: {{driver: stream_out, in: [raw], options: {{stream: {name}-copy, keep: true}}}}\n"
    )
    p = _run_model(model, "--seconds", "6")
    try:
        found = pylsl.resolve_byprop("name", name, 1, 15)
        assert found, "the model's outlet is visible"
        inlet = pylsl.StreamInlet(found[0])
        info = inlet.info(5)
        assert (info.channel_count(), info.nominal_srate()) == (4, 10_000.0)
        inlet.open_stream(5)
        got = []
        deadline = time.time() + 20
        while time.time() < deadline and p.poll() is None:
            chunk, _ = inlet.pull_chunk(timeout=0.2, max_samples=4096)
            if chunk:
                got.append(np.asarray(chunk, dtype=np.float32))
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        chunk, _ = inlet.pull_chunk(timeout=1.0, max_samples=100_000)
        if chunk:
            got.append(np.asarray(chunk, dtype=np.float32))
        data = np.concatenate(got)
        copy = rtloop.Stream.open(f"{name}-copy")
        allrows, _ = copy.reader().read(0, copy.written)
        # what the inlet received is a contiguous run of the signal, bit-identical
        start = int(np.flatnonzero((allrows == data[0]).all(axis=1))[0])
        np.testing.assert_array_equal(allrows[start : start + len(data)], data)
        assert len(data) > 1000
    finally:
        stop(p)
        if f"{name}-copy" in rtloop.Stream.list():
            rtloop.Stream.remove(f"{name}-copy")


def test_runtime_lsl_in_source_takes_a_pylsl_outlet(tmp_path) -> None:
    name = uname("rtin").replace("-", "")
    out = outlet(name, "float32", 3, 2000.0)
    model = tmp_path / "m.yaml"
    model.write_text(
        f"config: {{name: {name}}}\n"
        "signals:\n  x: {shape: [64, 3], dtype: float32, variable: true}\n"
        f"sources:\n  lsl: {{driver: lsl_in, out: [x], options: {{query: {name}}}}}\n"
        f"sinks:\n  copy: {{driver: stream_out, in: [x], options: {{stream: {name}-copy, keep: true}}}}\n"
    )
    p = _run_model(model, "--seconds", "5")
    try:
        assert out.wait_for_consumers(15)
        data = np.arange(3 * 3000, dtype=np.float32).reshape(3000, 3)
        for i in range(0, 3000, 100):
            out.push_chunk(data[i : i + 100])
            time.sleep(0.01)
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        copy = rtloop.Stream.open(f"{name}-copy")
        got, _ = copy.reader().read(0, copy.written)
        np.testing.assert_array_equal(got, data)
    finally:
        stop(p)
        if f"{name}-copy" in rtloop.Stream.list():
            rtloop.Stream.remove(f"{name}-copy")


def test_runtime_lsl_in_refuses_an_outlet_that_does_not_fit(tmp_path) -> None:
    name = uname("rtbad").replace("-", "")
    keep = outlet(name, "int16", 5, 100.0)
    model = tmp_path / "m.yaml"
    model.write_text(
        f"config: {{name: {name}}}\n"
        "signals:\n  x: {shape: [16, 3], dtype: float32, variable: true}\n"
        f"sources:\n  lsl: {{driver: lsl_in, out: [x], options: {{query: {name}, timeout: 5}}}}\n"
    )
    p = _run_model(model, "--ticks", "100")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1
    assert "does not fit" in err and "5 channels of int16" in err, err
    del keep
