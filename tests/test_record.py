"""`rtloop record` as a process: record while writing, load with rtloop.load and numpy.memmap,
kill -9 in the middle and load what was flushed, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, List

import numpy as np
import pytest

import rtloop
import rtloop.reports
from _peers import need


def rtloop_exe() -> List[str]:
    beside = Path(sys.executable).parent / "rtloop"
    return [str(beside) if beside.exists() else "rtloop"]


def wait_until(cond: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Poll ``cond`` until it holds (a generous deadline, never a fixed sleep)."""
    t = time.monotonic()
    while not cond():
        assert time.monotonic() - t < timeout, f"timed out waiting for {what}"
        time.sleep(0.01)


def consumed(name: str, n: int) -> bool:
    """Whether the stream's (one) reader has consumed ``n`` samples."""
    readers = rtloop.Stream.open(name).stats()["readers"]
    return bool(readers) and all(r["cursor"] >= n for r in readers)


def start_recorder(name: str, out: Path, *args: str, **popen: Any) -> subprocess.Popen[str]:
    p = subprocess.Popen([*rtloop_exe(), "record", name, "--out", str(out), "--flush-ms", "20", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    # it registers its reader before it writes the header
    t = time.monotonic()
    while not (out / name / "header.json").exists():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() - t < 20
        time.sleep(0.02)
    return p


def test_record_and_load_round_trip(make_name: Callable[[], str], tmp_path: Path) -> None:
    name = make_name()
    s = rtloop.Stream.create(name, n_channels=3, dtype="float32", sfreq=500.0, capacity=4096, ch_names=["x", "y", "z"])
    rec = start_recorder(name, tmp_path)
    w = s.writer()
    x = np.arange(3000, dtype=np.float32).reshape(1000, 3)
    for k in range(10):
        w.push_chunk(x[k * 100:(k + 1) * 100])
        time.sleep(0.01)
    w.push_event("stim", "on", 42)
    w.close()  # the writer closes: the recorder records everything, then finishes by itself
    out, err = rec.communicate(timeout=30)
    assert rec.returncode == 0, err
    r = rtloop.load(tmp_path)
    assert r.complete and r.ch_names == ["x", "y", "z"] and r.sfreq == 500.0
    np.testing.assert_array_equal(r.data, x)
    assert np.all(np.diff(r.timestamps) >= 0) and len(r.timestamps) == 1000
    assert r.events[0]["type"] == "stim" and r.events[0]["sample"] == 42
    # without rtloop: numpy.memmap in one line
    h = json.loads((tmp_path / name / "header.json").read_text())
    m = np.memmap(tmp_path / name / "data.bin", dtype=h["dtype"]).reshape(-1, h["n_channels"])
    np.testing.assert_array_equal(m, x)


def test_kill_9_leaves_a_readable_recording(make_name: Callable[[], str], tmp_path: Path) -> None:
    name = make_name()
    s = rtloop.Stream.create(name, n_channels=8, dtype="int16", sfreq=30000.0, capacity=1 << 16)
    rec = start_recorder(name, tmp_path)
    w = s.writer()
    written = 0
    t = time.monotonic()
    while time.monotonic() - t < 1.0:
        block = (np.arange(300 * 8) + written * 8).astype(np.int16).reshape(300, 8)
        w.push_chunk(block)
        written += 300
        time.sleep(0.005)
    # kill it once it has put samples in its file (on a loaded machine it may not have
    # flushed anything yet after a second)
    wait_until(lambda: (tmp_path / name / "data.bin").stat().st_size >= 8 * 2
               and (tmp_path / name / "timestamps.bin").stat().st_size >= 8, "the recorder to write samples")
    rec.send_signal(signal.SIGKILL)
    rec.communicate()
    r = rtloop.load(tmp_path / name)
    assert not r.complete
    n = r.data.shape[0]
    assert 0 < n <= written
    expect = (np.arange(n * 8) + int(r.header["first_sample"]) * 8).astype(np.int16).reshape(n, 8)
    np.testing.assert_array_equal(r.data, expect)  # every whole sample up to the cut is intact
    w.close()


def test_bad_input(tmp_path: Path, make_name: Callable[[], str]) -> None:
    o = subprocess.run([*rtloop_exe(), "record", "no-such-stream", "--out", str(tmp_path)], capture_output=True, text=True)
    assert o.returncode == 1 and "no stream named" in o.stderr
    name = make_name()
    rtloop.Stream.create(name, n_channels=1, dtype="float32", sfreq=1.0, capacity=16)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    if os.geteuid() != 0:  # root writes anywhere
        o = subprocess.run([*rtloop_exe(), "record", name, "--out", str(ro)], capture_output=True, text=True)
        assert o.returncode == 1 and "not writable" in o.stderr
    with pytest.raises(FileNotFoundError, match="not an rtloop recording"):
        rtloop.load(tmp_path)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "header.json").write_text('{"format": "xdf"}')
    with pytest.raises(ValueError, match="not an rtloop recording header"):
        rtloop.load(bad)


def back_dated(stamps: np.ndarray, rate: float) -> np.ndarray:
    """Each sample's time from a recording's commit stamps (one per commit, repeated for each
    of its samples): the commit's earlier samples one period earlier each, as readers see them."""
    t = np.array(stamps, dtype=np.float64)
    after = 0
    for i in range(len(t) - 2, -1, -1):
        after = after + 1 if stamps[i + 1] == stamps[i] else 0
        t[i] -= after / rate
    return t


def test_export_loads_in_pyxdf_and_pynwb(make_name: Callable[[], str], tmp_path: Path) -> None:
    pyxdf = need("pyxdf", "pyxdf")
    pynwb = need("pynwb", "pynwb")
    from rtloop.export import to_nwb, to_xdf

    name = make_name()
    s = rtloop.Stream.create(name, n_channels=2, dtype="int16", sfreq=1000.0, capacity=4096, ch_names=["a", "b"])
    rec = start_recorder(name, tmp_path)
    w = s.writer()
    x = np.arange(400, dtype=np.int16).reshape(200, 2)
    w.push_chunk(x[:100])
    w.push_event("stim", "on", 150)
    w.push_chunk(x[100:])
    w.close()
    rec.communicate(timeout=30)
    r = rtloop.load(tmp_path / name)
    first = int(r.header["first_sample"])

    to_xdf(r, tmp_path / "r.xdf")
    streams, _ = pyxdf.load_xdf(str(tmp_path / "r.xdf"), dejitter_timestamps=False)
    by_name = {st["info"]["name"][0]: st for st in streams}
    data = by_name[name]
    np.testing.assert_array_equal(data["time_series"], x)
    np.testing.assert_allclose(data["time_stamps"], back_dated(r.timestamps, 1000.0))
    labels = [c["label"][0] for c in data["info"]["desc"][0]["channels"][0]["channel"]]
    assert labels == ["a", "b"]
    assert by_name[name + "-events"]["time_series"][0][0] == "stim=on"
    assert first == 0

    to_nwb(r, tmp_path / "r.nwb")
    with pynwb.NWBHDF5IO(str(tmp_path / "r.nwb"), "r") as io:
        nwb = io.read()
        ts = nwb.acquisition[name]
        np.testing.assert_array_equal(ts.data[:], x)
        assert type(ts).__name__ == "TimeSeries", "no units, no electrode type: a plain series"
        assert (ts.starting_time, ts.rate, ts.timestamps) == (0.0, 1000.0, None)
        assert list(nwb.get_events_table("events")["annotation"][:]) == ["stim=on"]


def test_xdf_export_keeps_type_source_id_channels_and_description(
    make_name: Callable[[], str], tmp_path: Path
) -> None:
    """The outside finding: XDF export wrote the type as `rtloop` whatever it was and dropped
    the source id, the description and the channels' types. pyxdf reads each back."""
    pyxdf = need("pyxdf", "pyxdf")
    from rtloop.export import to_xdf

    name = make_name()
    desc = {"amplifier": {"model": "A-1", "gain": 24}, "subject": "s<1>", "bad key!": [1, 2]}
    s = rtloop.Stream.create(
        name, n_channels=3, dtype="float32", sfreq=250.0, capacity=4096, content_type="EEG",
        source_id="amp-1234", ch_names=["Fz", "Cz", "EOG"], ch_units=["uV", "uV", "mV"],
        ch_types=["EEG", "EEG", "EOG"], desc=desc,
    )
    rec = start_recorder(name, tmp_path)
    w = s.writer()
    for k in range(5):  # five commits: five distinct times
        w.push_chunk(np.full((10, 3), k, np.float32))
        time.sleep(0.005)
    w.close()
    rec.communicate(timeout=30)
    to_xdf(tmp_path / name, tmp_path / "r.xdf")
    streams, _ = pyxdf.load_xdf(str(tmp_path / "r.xdf"), dejitter_timestamps=False)
    got = next(st for st in streams if st["info"]["name"][0] == name)
    info = got["info"]
    # each sample its own time: 250 Hz steps inside each commit of 10, no flat runs
    r = rtloop.load(tmp_path / name)
    np.testing.assert_allclose(got["time_stamps"], back_dated(r.timestamps, 250.0))
    steps = np.diff(got["time_stamps"]).reshape(-1)
    assert np.allclose(np.delete(steps, [9, 19, 29, 39]), 0.004)
    assert info["type"] == ["EEG"] and info["source_id"] == ["amp-1234"]
    chans = info["desc"][0]["channels"][0]["channel"]
    assert [(c["label"][0], c["unit"][0], c["type"][0]) for c in chans] == [
        ("Fz", "uV", "EEG"), ("Cz", "uV", "EEG"), ("EOG", "mV", "EOG")]
    d = info["desc"][0]
    assert d["amplifier"][0]["model"] == ["A-1"] and d["amplifier"][0]["gain"] == ["24"]
    assert d["subject"] == ["s<1>"]
    assert d["bad_key_"] == ["1", "2"], "a key XML cannot name is spelled with _, lists repeat"


def test_nwb_export_of_electrodes_is_an_electrical_series_in_volts(
    make_name: Callable[[], str], tmp_path: Path
) -> None:
    """The outside finding: NWB export wrote a plain TimeSeries in uV with conversion 1.0.
    Electrode channels are an ElectricalSeries with an electrodes table, a device and an
    electrode group, in volts through `conversion`; pynwb's validator, neo and
    SpikeInterface's NWB reader agree on channels, values and times."""
    pynwb = need("pynwb", "pynwb")
    neo = need("neo", "neo")
    se = need("spikeinterface.extractors", "spikeinterface")
    from rtloop.export import to_nwb

    name = make_name()
    s = rtloop.Stream.create(
        name, n_channels=3, dtype="int16", sfreq=1000.0, capacity=4096, content_type="EEG",
        source_id="amp-7", ch_names=["Fz", "Cz", "EOG"], ch_units=["uV", "uV", "mV"],
        ch_types=["EEG", "EEG", "EOG"],
    )
    rec = start_recorder(name, tmp_path)
    w = s.writer()
    x = (np.arange(600, dtype=np.int16) - 300).reshape(200, 3)
    w.push_chunk(x)
    w.close()
    rec.communicate(timeout=30)
    r = rtloop.load(tmp_path / name)
    path = tmp_path / "r.nwb"
    to_nwb(r, path)
    assert pynwb.validate(path=str(path)) == []
    volts = x * np.array([1e-6, 1e-6, 1e-3])
    with pynwb.NWBHDF5IO(str(path), "r") as io:
        nwb = io.read()
        es = nwb.acquisition[name]
        assert type(es).__name__ == "ElectricalSeries"
        np.testing.assert_array_equal(es.data[:], x)  # stored as recorded
        assert es.conversion == 1e-6 and list(es.channel_conversion[:]) == [1.0, 1.0, 1000.0]
        assert list(es.electrodes.table["channel_name"][:]) == ["Fz", "Cz", "EOG"]
        assert list(es.electrodes.table["channel_type"][:]) == ["EEG", "EEG", "EOG"]
        assert es.electrodes.table["group"][0].device.name == "amp-7"
        # regular, no gap: timed by its rate
        assert (es.starting_time, es.rate, es.timestamps) == (0.0, 1000.0, None)
    # neo's NWBIO (0.14) reads no ElectricalSeries at all: it keeps every field of a series
    # as an annotation and refuses the electrodes region NWB requires of one. Kept as a canary:
    # when neo reads it, this fails, and the values get checked here as SpikeInterface's are.
    with pytest.raises(ValueError, match="DynamicTableRegion"):
        neo.io.NWBIO(str(path), mode="r").read_block()
    # SpikeInterface: microvolts through its gains, channel ids from the table
    si = se.read_nwb_recording(str(path), electrical_series_path=f"acquisition/{name}")
    assert list(si.get_channel_ids()) == ["Fz", "Cz", "EOG"] and si.get_num_samples() == 200
    np.testing.assert_allclose(si.get_channel_gains(), [1.0, 1.0, 1000.0])
    np.testing.assert_allclose(si.get_traces(return_in_uV=True), volts * 1e6, rtol=1e-6)
    np.testing.assert_allclose(si.get_times(), np.arange(200) / 1000.0)


def _child_pids() -> List[int]:
    """This process's children, from /proc (every thread's list)."""
    pids: List[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        pids += [int(x) for x in (task / "children").read_text().split()]
    return pids


def test_start_and_stop_from_python(make_name: Callable[[], str], tmp_path: Path) -> None:
    """`rtloop.record` runs the recording library in this process (no `rtloop record`
    child); stop() returns the same reports the command prints."""
    name = make_name()
    s = rtloop.Stream.create(name, n_channels=2, dtype="float64", sfreq=100.0, capacity=1024)
    w = s.writer()
    before = _child_pids()
    with rtloop.record(name, tmp_path) as rec:
        assert rec.running
        assert _child_pids() == before, "the recorder is not a child process"
        w.push_chunk(np.ones((50, 2)))
        wait_until(lambda: consumed(name, 50), "the recorder to take the 50 samples")
        reports = rec.stop()
    assert reports[0]["samples"] == 50 and reports[0]["ended"] == "stopped"
    # a typed report: the Python class names exactly the fields the recording library gives
    rtloop.reports.RecordReport.check(reports[0])
    assert reports[0].samples == 50
    r = rtloop.load(tmp_path / name)
    assert r.complete and r.data.shape == (50, 2)
    w.close()
    with pytest.raises(RuntimeError, match="no stream named"):
        rtloop.record("no-such-stream-py", tmp_path)


def test_the_binding_hands_reports_as_objects_not_json_text(make_name: Callable[[], str], tmp_path: Path) -> None:
    """The native session returns the recording library's reports as Python objects made from
    the Rust value (a list of dicts), not JSON text for Python to parse again."""
    from rtloop._rtloop import RecordSession

    name = make_name()
    s = rtloop.Stream.create(name, n_channels=2, dtype="float64", sfreq=100.0, capacity=1024)
    w = s.writer()
    session = RecordSession([name], tmp_path)
    w.push_chunk(np.ones((20, 2)))
    wait_until(lambda: consumed(name, 20), "the recorder to take the 20 samples")
    out = session.stop()
    assert isinstance(out, list) and len(out) == 1 and type(out[0]) is dict, repr(out)[:200]
    assert out[0]["samples"] == 20 and out[0]["ended"] == "stopped"
    assert isinstance(out[0]["seconds"], float) and isinstance(out[0]["bytes"], int)
    rtloop.reports.RecordReport.check(out[0])
    # a second stop has nothing more to report
    assert session.stop() == []
    w.close()


def test_control_socket_starts_splits_and_stops(make_name: Callable[[], str], tmp_path: Path) -> None:
    import socket as so

    name = make_name()
    s = rtloop.Stream.create(name, n_channels=1, dtype="int32", sfreq=1000.0, capacity=1 << 16)
    ctl = str(tmp_path / "ctl.sock")
    p = subprocess.Popen([*rtloop_exe(), "--json", "record", name, "--out", str(tmp_path / "rec"), "--control", ctl, "--wait-start"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t = time.monotonic()
    while not os.path.exists(ctl) or not (tmp_path / "rec" / name / "header.json").exists():
        assert p.poll() is None and time.monotonic() - t < 20
        time.sleep(0.02)
    c = so.socket(so.AF_UNIX)
    c.connect(ctl)
    f = c.makefile("rw")

    def cmd(x: str) -> str:
        f.write(x + "\n")
        f.flush()
        return f.readline().strip()

    w = s.writer()
    w.push_chunk(np.full((100, 1), -1, np.int32))  # before start: not recorded
    wait_until(lambda: consumed(name, 100), "the paused recorder to pass the first 100")
    assert json.loads(cmd("status"))["paused"] is True
    assert cmd("start") == "ok"
    w.push_chunk(np.arange(100, dtype=np.int32).reshape(100, 1))
    wait_until(lambda: json.loads(cmd("status"))["samples"] == [100], "100 samples recorded")
    assert cmd("split") == "ok"
    wait_until(lambda: (tmp_path / "rec" / f"{name}.0002" / "header.json").exists(), "the split")
    w.push_chunk(np.arange(100, 200, dtype=np.int32).reshape(100, 1))
    wait_until(lambda: json.loads(cmd("status"))["samples"] == [200], "200 samples recorded")
    st = json.loads(cmd("status"))
    assert st["samples"] == [200] and st["lost"] == [0] and st["lost_events"] == [0]
    assert cmd("bogus").startswith("error: unknown command")
    assert cmd("stop") == "ok"
    f.close()
    c.close()
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    a = rtloop.load(tmp_path / "rec" / name)
    b = rtloop.load(tmp_path / "rec" / f"{name}.0002")
    np.testing.assert_array_equal(np.vstack([a.data, b.data])[:, 0], np.arange(200))
    assert a.header["ended"] == "split" and b.header["segment"] == 2
    assert not os.path.exists(ctl), "the control socket is removed on exit"
    w.close()


def test_python_recorder_serves_the_same_control_socket(make_name: Callable[[], str], tmp_path: Path) -> None:
    """`rtloop.record(..., control=PATH)` answers the commands `rtloop record --control` does
    (one implementation, in the recorder's library): status, pause, start, split and stop
    over the socket; `stop()` removes the socket file; a socket that cannot be made raises
    OSError naming the path and leaves nothing recording."""
    import socket as so

    name = make_name()
    s = rtloop.Stream.create(name, n_channels=1, dtype="int32", sfreq=1000.0, capacity=1 << 16)
    w = s.writer()
    ctl = tmp_path / "py-ctl.sock"
    rec = rtloop.record(name, tmp_path / "rec", control=ctl)
    assert ctl.exists()
    c = so.socket(so.AF_UNIX)
    c.connect(str(ctl))
    f = c.makefile("rw")

    def cmd(x: str) -> str:
        f.write(x + "\n")
        f.flush()
        return f.readline().strip()

    w.push_chunk(np.arange(50, dtype=np.int32).reshape(50, 1))
    wait_until(lambda: json.loads(cmd("status"))["samples"] == [50], "50 samples recorded")
    st = json.loads(cmd("status"))
    assert st == {"streams": [name], "samples": [50], "lost": [0], "lost_events": [0], "paused": False}
    assert cmd("pause") == "ok" and json.loads(cmd("status"))["paused"] is True
    w.push_chunk(np.full((30, 1), -1, np.int32))  # paused: not recorded
    wait_until(lambda: consumed(name, 80), "the paused recorder to pass 30 more")
    assert cmd("start") == "ok"
    assert cmd("split") == "ok"
    wait_until(lambda: (tmp_path / "rec" / f"{name}.0002" / "header.json").exists(), "the split")
    w.push_chunk(np.arange(50, 100, dtype=np.int32).reshape(50, 1))
    wait_until(lambda: json.loads(cmd("status"))["samples"] == [100], "100 samples recorded")
    assert cmd("rewind") == 'error: unknown command "rewind"; allowed: status, start, pause, split, stop'
    assert cmd("stop") == "ok"
    wait_until(lambda: not rec.running, "the recorder to stop on `stop`")
    # stop() with the client still connected: it ends the connection instead of waiting
    reports = rec.stop()
    assert f.readline() == "", "the connected client reads the end"
    f.close()
    c.close()
    assert not ctl.exists(), "stop() removes the control socket"
    a = rtloop.load(tmp_path / "rec" / name)
    b = rtloop.load(tmp_path / "rec" / f"{name}.0002")
    np.testing.assert_array_equal(np.vstack([a.data, b.data])[:, 0], np.arange(100))
    assert [r.samples for r in reports] == [100] and reports[0].lost_samples == 0
    # a socket in a directory that does not exist: OSError with the path, nothing recording
    bad = tmp_path / "no-such-dir" / "ctl.sock"
    with pytest.raises(OSError, match="cannot listen on control socket .*no-such-dir"):
        rtloop.record(name, tmp_path / "rec2", control=bad)
    wait_until(lambda: len(rtloop.Stream.open(name).stats()["readers"]) == 0, "the refused recorder's reader to go")
    w.close()


def test_replay_of_an_xdf_file(make_name: Callable[[], str], tmp_path: Path) -> None:
    from rtloop.export import to_xdf

    name = make_name()
    s = rtloop.Stream.create(name, n_channels=3, dtype="float32", sfreq=200.0, capacity=4096, ch_names=["a", "b", "c"])
    rec = start_recorder(name, tmp_path)
    w = s.writer()
    x = np.arange(600, dtype=np.float32).reshape(200, 3)
    w.push_chunk(x[:100])
    w.push_event("cue", "left", 120)
    w.push_chunk(x[100:])
    w.close()
    rec.communicate(timeout=30)
    to_xdf(tmp_path / name, tmp_path / "r.xdf")
    again = make_name()
    o = subprocess.run([*rtloop_exe(), "replay", str(tmp_path / "r.xdf"), "--stream", again, "--fast", "--keep"],
                       capture_output=True, text=True, timeout=60)
    assert o.returncode == 0, o.stderr
    assert "200 samples and 1 events" in o.stdout
    r = rtloop.Stream.open(again).reader(mode="latest")
    np.testing.assert_array_equal(r.window(0, 200), x)
    assert rtloop.Stream.open(again).ch_names == ["a", "b", "c"]
    ev = r.read_events(0, 1)[0]
    # XDF carries times, not sample indices: the marker lands on the first sample with its
    # time, and samples committed together share one time (100..199 here)
    assert (ev.type, ev.value) == ("cue", "left") and 100 <= ev.sample <= 120
    r.close()
    # a damaged or foreign file: the error names the problem
    (tmp_path / "bad.xdf").write_bytes(b"GDF 2.20 not xdf")
    o = subprocess.run([*rtloop_exe(), "replay", str(tmp_path / "bad.xdf")], capture_output=True, text=True, timeout=60)
    assert o.returncode == 1 and "not an XDF file" in o.stderr
    (tmp_path / "cut.xdf").write_bytes((tmp_path / "r.xdf").read_bytes()[:300])
    o = subprocess.run([*rtloop_exe(), "replay", str(tmp_path / "cut.xdf")], capture_output=True, text=True, timeout=60)
    assert o.returncode == 1 and "truncated" in o.stderr


def test_disk_full_gives_a_clear_error_and_a_readable_recording(make_name: Callable[[], str], tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(small)],
                                          capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a 2 MiB tmpfs")
    try:
        name = make_name()
        s = rtloop.Stream.create(name, n_channels=64, dtype="float32", sfreq=1000.0, capacity=1 << 14)
        rec = start_recorder(name, small)
        w = s.writer()
        block = np.ones((100, 64), np.float32)  # 25.6 kB per block: 2 MiB fills after ~80
        for _ in range(200):
            w.push_chunk(block)
            time.sleep(0.002)
            if rec.poll() is not None:
                break
        out, err = rec.communicate(timeout=30)
        assert rec.returncode == 1
        assert "No space left" in err and "stays readable" in err, err
        r = rtloop.load(small / name)
        assert r.data.shape[0] > 0 and np.all(r.data == 1.0)
        w.close()
    finally:
        # lazy: detaches even while something still holds a file there, so pytest can
        # remove its temporary directory
        subprocess.run(["umount", "-l", str(small)], capture_output=True)


def test_a_writer_that_dies_ends_the_recording(make_name: Callable[[], str], tmp_path: Path, child: Any) -> None:
    name = make_name()
    rtloop.Stream.create(name, n_channels=1, dtype="int32", sfreq=100.0, capacity=1024)
    rec = start_recorder(name, tmp_path)
    c = child(
        """
        import sys, time, numpy as np, rtloop
        w = rtloop.Stream.open(sys.argv[1]).writer()
        w.push_chunk(np.arange(10, dtype=np.int32).reshape(10, 1))
        print("written", flush=True)
        time.sleep(60)
        """,
        name,
    )
    c.expect("written")
    wait_until(lambda: consumed(name, 10), "the recorder to take the 10 samples")
    c.proc.kill()
    c.proc.wait()
    out, err = rec.communicate(timeout=30)
    assert rec.returncode == 0, err
    r = rtloop.load(tmp_path / name)
    assert r.complete and "writer died" in r.header["ended"]
    np.testing.assert_array_equal(r.data[:, 0], np.arange(10))


def test_recordings_and_the_control_socket_are_private_even_with_umask_000(
    make_name: Callable[[], str], tmp_path: Path
) -> None:
    name = make_name()
    s = rtloop.Stream.create(name, n_channels=1, dtype="int32", sfreq=1000.0, capacity=4096)
    ctl = tmp_path / "ctl.sock"
    rec = start_recorder(name, tmp_path / "out", "--control", str(ctl), preexec_fn=lambda: os.umask(0))
    wait_until(ctl.exists, "the control socket")
    assert ctl.stat().st_mode & 0o777 == 0o600
    w = s.writer()
    w.push_chunk(np.arange(10, dtype=np.int32).reshape(10, 1))
    w.close()
    out, err = rec.communicate(timeout=30)
    assert rec.returncode == 0, err
    d = tmp_path / "out" / name
    assert d.stat().st_mode & 0o777 == 0o700
    for f in d.iterdir():
        assert f.stat().st_mode & 0o777 == 0o600, f


def _write_recording(d: Path, first: int, gaps: List[List[int]], rows: int, events: List[int]) -> None:
    """A recording directory in the recorder's format (int64 data = the sample index),
    with ``gaps`` between rows, as a lapped recorder leaves it."""
    d.mkdir(parents=True)
    header = {
        "format": "rtloop-recording", "version": 1, "stream": d.name, "dtype": "int64",
        "n_channels": 1, "ch_names": ["i"], "ch_units": [""], "sfreq": 1000.0,
        "first_sample": first, "start_monotonic_ns": 0, "start_unix_ns": 1_700_000_000_000_000_000,
        "samples": rows, "events": len(events), "lost_samples": sum(g[1] for g in gaps),
        "gaps": gaps, "lost_events": 0, "complete": True, "ended": "stopped",
        "rtloop_version": "test", "segment": 1,
    }
    (d / "header.json").write_text(json.dumps(header))
    from rtloop.recording import Recording

    probe = Recording(d, header, np.zeros((0, 1)), np.zeros(0), [])
    samples = np.array([probe.sample_of(r) for r in range(rows)], dtype="<i8")
    (d / "data.bin").write_bytes(samples.tobytes())
    (d / "timestamps.bin").write_bytes((samples * 1_000_000).astype("<u8").tobytes())
    (d / "events.jsonl").write_text(
        "".join(json.dumps({"type": "mark", "value": str(e), "sample": e, "offset": 0, "duration": 0,
                            "stamp_ns": 0}) + "\n" for e in events)
    )


def test_row_of_follows_the_cases_shared_with_the_rust_recorder() -> None:
    from rtloop.recording import row_of

    cases = json.loads((Path(__file__).parents[1] / "crates/rtloop-record/tests/data/row_of_cases.json").read_text())
    for h in cases["headers"]:
        for sample, row, exact in h["cases"]:
            assert row_of(h, sample) == (row, exact), (h, sample)


def test_load_reads_through_the_recorders_own_reader(tmp_path: Path) -> None:
    """rtloop.load is the Rust recorder's reader (rtloop_record::Recording) with numpy maps on
    top: the same choice of directory, header check, sample count, cut event line and row
    mapping as replay and the exports, and its clear errors."""
    from rtloop.recording import row_of

    out = tmp_path / "out"
    # rows 0..99 hold samples 1000..1099, 500 lost, rows 100..199 hold 1600..1699
    _write_recording(out / "eeg", 1000, [[100, 500]], 200, [1000, 1150, 1600])
    r = rtloop.load(out)  # OUT holding one recording: that one
    assert r.path == out / "eeg" and r.data.shape == (200, 1) and isinstance(r.data, np.memmap)
    assert r.gaps == [(100, 500)] and r.lost_samples == 500
    assert [r.sample_of(k) for k in (0, 99, 100, 199)] == [1000, 1099, 1600, 1699]
    assert row_of(r.header, 1150) == (100, False) and r.row_of(1600) == (100, True)
    assert [e["sample"] for e in r.events] == [1000, 1150, 1600]
    # every field of the typed header, those this one lacks at their defaults
    assert r.header["ch_types"] == [] and r.header["description"] == ""
    # cut by kill -9: half a sample, half an event line
    with open(out / "eeg" / "data.bin", "r+b") as f:
        f.truncate(199 * 8 + 3)
    with open(out / "eeg" / "events.jsonl", "a") as f:
        f.write('{"type": "mark", "val')
    r = rtloop.load(out / "eeg")
    assert r.data.shape == (199, 1) and len(r.timestamps) == 199 and len(r.events) == 3
    assert int(r.data[-1, 0]) == 1698
    # two recordings inside: both named, and how to choose
    _write_recording(out / "emg", 0, [], 3, [])
    with pytest.raises(FileNotFoundError, match=r"recordings inside: eeg, emg \(load one of them by its directory\)"):
        rtloop.load(out)
    (out / "emg" / "header.json").write_text('{"format": "rtloop-recording", "vers')
    with pytest.raises(ValueError, match="header.json: not an rtloop recording header: damaged, not JSON"):
        rtloop.load(out / "emg")
    with pytest.raises(ValueError, match='"gaps" must be \\[row, lost\\] pairs'):
        row_of({"first_sample": 0, "gaps": [[1]]}, 5)


def test_exports_of_a_lapped_recording_put_every_event_on_its_sample(tmp_path: Path) -> None:
    pyxdf = need("pyxdf", "pyxdf")
    pynwb = need("pynwb", "pynwb")
    from rtloop.export import to_nwb, to_xdf

    d = tmp_path / "lapped"
    # rows 0..99 hold samples 1000..1099, then 500 lost, rows 100..199 hold 1600..1699, then
    # 300 lost, rows 200..299 hold 2000..2099
    events = [1000, 1050, 1099, 1650, 2000, 2099]
    _write_recording(d, 1000, [[100, 500], [200, 300]], 300, events)
    r = rtloop.load(d)
    assert r.lost_samples == 800
    for e in events:
        row, exact = r.row_of(e)
        assert exact and int(r.data[row, 0]) == e
    to_xdf(r, tmp_path / "l.xdf")
    streams, _ = pyxdf.load_xdf(str(tmp_path / "l.xdf"), dejitter_timestamps=False)
    by_name = {st["info"]["name"][0]: st for st in streams}
    marks = by_name["lapped-events"]
    # each marker's time is the timestamp of the row holding its sample (sample * 1 ms)
    np.testing.assert_allclose(marks["time_stamps"], np.array(events) * 1e-3)
    to_nwb(r, tmp_path / "l.nwb")
    with pynwb.NWBHDF5IO(str(tmp_path / "l.nwb"), "r") as io:
        nwb = io.read()
        t = nwb.get_events_table("events")["timestamp"][:]
        np.testing.assert_allclose(t, (np.array(events) - 1000) * 1e-3)


@pytest.mark.parametrize("seconds", [1e300, float("inf"), 0.0, -1.0])
def test_record_refuses_a_duration_out_of_range_naming_the_range(stream_name: str, tmp_path: Path, seconds: float) -> None:
    """`rtloop.record(..., seconds=1e300)` panicked inside the binding; every duration out of
    range is refused with the range instead, and nothing is recorded."""
    rtloop.Stream.create(stream_name, n_channels=1)
    with pytest.raises(ValueError, match=r"seconds=.*: a number of seconds > 0 and at most 1e9"):
        rtloop.record(stream_name, tmp_path / "out", seconds=seconds)
    assert not (tmp_path / "out" / stream_name).exists()
