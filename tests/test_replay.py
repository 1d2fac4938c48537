"""`rtloop replay` of SpikeGLX, Open Ephys binary and NWB files as a real process into a real
stream, read back with rtloop's reader and held against the formats' own readers: neo's
SpikeGLXRawIO and OpenEphysBinaryRawIO, and pynwb. Samples bit for bit, the same channel names
and gains; events at their samples; bad input answered with what was wrong.

The files are written here: SpikeInterface's ground-truth generator makes the signal (spikes
on noise), numpy the .bin / .dat and .npy files, pynwb the NWB file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import numpy as np
import pytest
from numpy.typing import NDArray

import rtloop
import rtloop.replay
from _peers import need
from test_cli import rtloop_cmd

RATE = 30000.0


def replay(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, RTLOOP_PYTHON=sys.executable)
    return subprocess.run([*rtloop_cmd(), "--json", "replay", *args], capture_output=True, text=True, timeout=300, env=env)


def replayed(path: Path, name: str, *args: str) -> Tuple[rtloop.Stream, NDArray[Any], List[rtloop.Event], Dict[str, Any]]:
    """Replay ``path`` as fast as possible into stream ``name``; its samples, events, report."""
    out = replay(str(path), "--fast", "--keep", "--stream", name, *args)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    s = rtloop.Stream.open(name)
    r = s.reader()
    data, _ = r.read(0, s.written)
    events = r.read_events(0, r.events_written)
    return s, data, events, report


def ground_truth(n_channels: int, seconds: float, scale: float) -> NDArray[np.int16]:
    """Spikes on noise from SpikeInterface's ground-truth generator, as int16 counts."""
    si = need("spikeinterface.core", "spikeinterface")
    rec, _ = si.generate_ground_truth_recording(
        durations=[seconds], sampling_frequency=RATE, num_channels=n_channels, num_units=4, seed=17
    )
    traces = rec.get_traces()
    return np.clip(np.round(traces / scale), -32768, 32767).astype(np.int16)


def write_binary(traces: NDArray[np.int16], path: Path) -> None:
    """Interleaved little-endian int16, sample-major: what SpikeGLX and Open Ephys store (and
    SpikeInterface's write_binary_recording writes, which leaves its file open)."""
    traces.astype("<i2").tofile(path)


# ---------------------------------------------------------------- SpikeGLX


def write_spikeglx(run: Path, traces: NDArray[np.int16], gains: List[int], kind: str = "ap") -> Path:
    """A Neuropixels 1.0 run: RUN/run_g0_imec0/run_g0_t0.imec0.ap.bin + .meta (AP gains per
    channel from the imro table, the sync channel last)."""
    n_ap = traces.shape[1] - 1
    d = run / "run_g0_imec0"
    d.mkdir(parents=True)
    bin_path = d / f"run_g0_t0.imec0.{kind}.bin"
    write_binary(traces, bin_path)
    imro = "(0,384)" + "".join(f"({c} 0 0 {gains[c]} 250 1)" for c in range(384))
    chmap = f"(384,0,1)" + "".join(f"(AP{c};{c}:{c})" for c in range(n_ap)) + "(SY0;768:768)"
    meta = {
        "acqApLfSy": "384,384,1", "appVersion": "20230905", "fileCreateTime": "2024-01-01T00:00:00",
        "fileName": str(bin_path), "fileSizeBytes": str(bin_path.stat().st_size),
        "fileTimeSecs": str(traces.shape[0] / RATE), "firstSample": "0", "imAiRangeMax": "0.6",
        "imAiRangeMin": "-0.6", "imMaxInt": "512", "imDatPrb_pn": "NP1000", "imDatPrb_sn": "18194814141",
        "imDatPrb_type": "0", "imDatPrb_slot": "2", "imDatPrb_port": "1", "imDatPrb_dock": "1",
        "imSampRate": str(RATE), "nSavedChans": str(n_ap + 1), "snsApLfSy": f"{n_ap},0,1",
        "snsSaveChanSubset": f"0:{n_ap - 1},768", "typeThis": "imec", "~imroTbl": imro, "~snsChanMap": chmap,
    }
    bin_path.with_suffix(".meta").write_text("".join(f"{k}={v}\n" for k, v in meta.items()))
    return bin_path


def test_spikeglx_replays_bit_identical_with_neos_names_and_gains(tmp_path: Path, stream_name: str) -> None:
    neo = need("neo", "neo")
    traces = ground_truth(384, 0.2, 2.34375)
    sync = (np.arange(len(traces)) // 3000 % 2).astype(np.int16)[:, None]
    traces = np.hstack([traces, sync])
    # two AP gains, as an imro table may set per channel
    gains = [500] * 192 + [1000] * 192
    write_spikeglx(tmp_path / "run_g0", traces, gains)

    s, data, events, report = replayed(tmp_path / "run_g0", stream_name)
    assert report["format"] == "spikeglx" and report["samples"] == len(traces)
    assert s.dtype == np.int16 and s.sfreq == RATE and s.n_channels == 385
    np.testing.assert_array_equal(data, traces)
    assert events == []

    io = neo.rawio.SpikeGLXRawIO(dirname=str(tmp_path / "run_g0"))
    io.parse_header()
    streams = list(io.header["signal_streams"]["name"])
    ap = streams.index("imec0.ap")
    chans = io.header["signal_channels"]
    mine = chans[chans["stream_id"] == io.header["signal_streams"]["id"][ap]]
    raw = io.get_analogsignal_chunk(stream_index=ap)
    # neo's AP stream: the 384 AP channels, bit for bit, with the same names and gains
    np.testing.assert_array_equal(data[:, :384], raw)
    assert s.ch_names[:384] == list(mine["name"])
    gain, offset = rtloop.replay.scale(s)
    np.testing.assert_array_equal(gain[:384], mine["gain"])
    np.testing.assert_array_equal(offset, 0.0)
    assert set(s.ch_units[:384]) == {"uV"} and set(mine["units"]) == {"uV"}
    # the sync channel is a bit field: raw bits, gain 1, no unit (neo keeps it in its own
    # stream, with the AP conversion factor as its gain)
    sy = streams.index("imec0.ap-SYNC")
    np.testing.assert_array_equal(data[:, 384:], io.get_analogsignal_chunk(stream_index=sy))
    assert (s.ch_names[384], gain[384], s.ch_units[384]) == ("SY0", 1.0, "")
    assert s.desc["replay"]["series"] == "run_g0_t0.imec0.ap"


def test_spikeglx_picks_a_series_and_says_what_is_wrong(tmp_path: Path, stream_name: str) -> None:
    traces = np.arange(30 * 5, dtype=np.int16).reshape(30, 5)
    ap = write_spikeglx(tmp_path / "run_g0", traces, [500] * 384)
    lf = ap.with_name("run_g0_t0.imec0.lf.bin")
    shutil.copy(ap, lf)
    shutil.copy(ap.with_suffix(".meta"), lf.with_suffix(".meta"))
    # two series and none picked: both listed
    out = replay(str(tmp_path / "run_g0"), "--fast", "--stream", stream_name)
    assert out.returncode != 0
    assert "2 series; pick one with --series: run_g0_t0.imec0.ap, run_g0_t0.imec0.lf" in out.stderr
    out = replay(str(tmp_path / "run_g0"), "--series", "imec9.ap", "--fast", "--stream", stream_name)
    assert "no series \"imec9.ap\"; it has: run_g0_t0.imec0.ap, run_g0_t0.imec0.lf" in out.stderr
    # the end of the name picks it
    s, data, _, _ = replayed(tmp_path / "run_g0", stream_name, "--series", "imec0.lf")
    np.testing.assert_array_equal(data, traces)
    # missing .meta
    lf.with_suffix(".meta").unlink()
    out = replay(str(lf), "--fast", "--stream", stream_name)
    assert out.returncode != 0 and "run_g0_t0.imec0.lf.meta: missing: SpikeGLX writes a .meta beside every .bin" in out.stderr
    # a truncated .bin
    with open(ap, "r+b") as f:
        f.truncate(30 * 10 - 3)
    out = replay(str(ap), "--fast", "--stream", stream_name)
    assert out.returncode != 0 and "is not a whole number of samples of 5 int16 channels" in out.stderr
    with open(ap, "r+b") as f:
        f.truncate(29 * 10)
    out = replay(str(ap), "--fast", "--stream", stream_name)
    assert out.returncode != 0 and "the .meta says fileSizeBytes=300, the file has 290 bytes: truncated (copy it again)" in out.stderr
    # a directory with no recording
    (tmp_path / "empty").mkdir()
    out = replay(str(tmp_path / "empty"), "--fast", "--stream", stream_name)
    assert out.returncode != 0
    assert "a directory with no recording in it" in out.stderr and "rtloop replays an rtloop recording directory" in out.stderr


# ---------------------------------------------------------------- Open Ephys


def npy(path: Path, a: NDArray[Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, a)


def write_openephys(root: Path, traces: NDArray[np.int16], ttl: List[Tuple[int, int]], first: int = 1000) -> Path:
    """Open Ephys GUI 0.6 binary: Record Node 101/experiment1/recording1 with one acquisition
    board stream (6 neural channels + 2 ADC), a second stream, TTL edges and a message."""
    rec = root / "Record Node 101" / "experiment1" / "recording1"
    board = "Acquisition_Board-100.Rhythm Data"
    n = traces.shape[1]
    names = [f"CH{i + 1}" for i in range(n - 2)] + ["ADC1", "ADC2"]
    chans = [
        {"channel_name": c, "description": "", "identifier": "", "history": "", "bit_volts": 0.195 if "ADC" not in c else 0.00015258789, "units": "uV" if "ADC" not in c else "V"}
        for c in names
    ]
    other = "Acquisition_Board-100.Other"
    oebin = {
        "GUI version": "0.6.7",
        "continuous": [
            {"folder_name": board + "/", "sample_rate": RATE, "source_processor_name": "Acquisition Board", "source_processor_id": 100, "stream_name": "Rhythm Data", "recorded_processor": "Acquisition Board", "recorded_processor_id": 100, "num_channels": n, "channels": chans},
            {"folder_name": other + "/", "sample_rate": 1000.0, "source_processor_name": "Acquisition Board", "source_processor_id": 100, "stream_name": "Other", "recorded_processor": "Acquisition Board", "recorded_processor_id": 100, "num_channels": 1, "channels": [{"channel_name": "AUX1", "description": "", "identifier": "", "history": "", "bit_volts": 0.0000374, "units": "V"}]},
        ],
        "events": [
            {"folder_name": board + "/TTL/", "channel_name": "Rhythm Data TTL Input", "description": "", "identifier": "", "sample_rate": RATE, "type": "int16", "num_channels": 1, "source_processor": "Acquisition Board", "stream_name": "Rhythm Data"},
            {"folder_name": "MessageCenter/", "channel_name": "Messages", "description": "", "identifier": "", "sample_rate": RATE, "type": "string", "num_channels": 1, "source_processor": "Message Center", "stream_name": "Rhythm Data"},
        ],
        "spikes": [],
    }
    rec.mkdir(parents=True)
    (rec / "structure.oebin").write_text(json.dumps(oebin, indent=2))
    c = rec / "continuous" / board
    c.mkdir(parents=True)
    write_binary(traces, c / "continuous.dat")
    samples = np.arange(first, first + len(traces), dtype=np.int64)
    npy(c / "sample_numbers.npy", samples)
    npy(c / "timestamps.npy", samples / RATE)
    o = rec / "continuous" / other
    o.mkdir(parents=True)
    (np.arange(20, dtype=np.int16)).tofile(o / "continuous.dat")
    npy(o / "sample_numbers.npy", np.arange(20, dtype=np.int64))
    npy(o / "timestamps.npy", np.arange(20) / 1000.0)
    e = rec / "events" / board / "TTL"
    npy(e / "sample_numbers.npy", np.array([first + s for s, _ in ttl], dtype=np.int64))
    npy(e / "timestamps.npy", np.array([(first + s) / RATE for s, _ in ttl]))
    npy(e / "states.npy", np.array([st for _, st in ttl], dtype=np.int16))
    npy(e / "full_words.npy", np.zeros(len(ttl), dtype=np.uint64))
    m = rec / "events" / "MessageCenter"
    npy(m / "sample_numbers.npy", np.array([first + 100], dtype=np.int64))
    npy(m / "timestamps.npy", np.array([(first + 100) / RATE]))
    npy(m / "text.npy", np.array([b"stimulus on"], dtype="|S64"))
    return rec


def test_openephys_replays_bit_identical_with_neos_names_gains_and_events(tmp_path: Path, stream_name: str) -> None:
    neo = need("neo", "neo")
    traces = ground_truth(8, 0.2, 0.195)
    ttl = [(500, 1), (700, 2), (800, -1), (1200, -2), (3000, 1), (3300, -1)]
    write_openephys(tmp_path / "session", traces, ttl)

    # two streams: picked by --series, listed when it is missing
    out = replay(str(tmp_path / "session"), "--fast", "--stream", stream_name)
    assert out.returncode != 0
    assert "pick one with --series: Acquisition_Board-100.Rhythm Data, Acquisition_Board-100.Other" in out.stderr
    s, data, events, report = replayed(tmp_path / "session", stream_name, "--series", "Acquisition_Board-100.Rhythm Data")
    assert report["format"] == "openephys" and report["samples"] == len(traces)
    assert s.dtype == np.int16 and s.sfreq == RATE
    np.testing.assert_array_equal(data, traces)

    io = neo.rawio.OpenEphysBinaryRawIO(dirname=str(tmp_path / "session"))
    io.parse_header()
    chans = io.header["signal_channels"]
    gain, _ = rtloop.replay.scale(s)
    seen = 0
    for k, sid in enumerate(io.header["signal_streams"]["id"]):
        mine = chans[chans["stream_id"] == sid]
        if not set(mine["name"]) <= set(s.ch_names):
            continue  # the other stream
        cols = [s.ch_names.index(n) for n in mine["name"]]
        # neo splits the ADC channels into their own stream; the replay keeps the file's
        # one stream: the same columns, bit for bit, names, gains and units
        np.testing.assert_array_equal(data[:, cols], io.get_analogsignal_chunk(stream_index=k))
        np.testing.assert_array_equal(gain[cols], mine["gain"])
        assert [s.ch_units[c] for c in cols] == list(mine["units"])
        seen += len(cols)
    assert seen == 8

    # TTL: one event per rising edge, at its sample, duration to the falling edge (as neo
    # pairs them); the message centre's text at its sample
    ttl_events = [(e.sample, e.value, e.duration) for e in events if e.type == "TTL"]
    assert ttl_events == [(500, 1, 300), (700, 2, 500), (3000, 1, 300)]
    ne = [i for i, n in enumerate(io.header["event_channels"]["name"]) if "TTL" in n][0]
    _, durations, labels = io.get_event_timestamps(event_channel_index=ne)
    assert sorted((int(lab), round(float(d) * RATE)) for lab, d in zip(labels, durations)) == sorted((v, d) for _, v, d in ttl_events)
    assert [(e.sample, e.value) for e in events if e.type == "text"] == [(100, "stimulus on")]


def test_openephys_bad_input_says_what_is_wrong(tmp_path: Path, stream_name: str) -> None:
    traces = np.arange(80, dtype=np.int16).reshape(10, 8)
    rec = write_openephys(tmp_path / "session", traces, [])
    board = rec / "continuous" / "Acquisition_Board-100.Rhythm Data"
    args = ("--fast", "--stream", stream_name, "--series", "Acquisition_Board-100.Rhythm Data")
    dat = board / "continuous.dat"
    with open(dat, "r+b") as f:
        f.truncate(dat.stat().st_size - 16)
    out = replay(str(rec), *args)
    assert out.returncode != 0 and "holds 9 samples but" in out.stderr and "continuous.dat is truncated" in out.stderr
    with open(dat, "r+b") as f:
        f.truncate(dat.stat().st_size - 3)
    out = replay(str(rec), *args)
    assert out.returncode != 0 and "is not a whole number of samples of 8 int16 channels" in out.stderr
    dat.unlink()
    out = replay(str(rec), *args)
    assert out.returncode != 0 and "continuous.dat: missing" in out.stderr
    (rec / "structure.oebin").write_text("{\"continuous\": 3}")
    out = replay(str(rec / "structure.oebin"), *args)
    assert out.returncode != 0 and "no \"continuous\" list: not an Open Ephys structure.oebin" in out.stderr


# ---------------------------------------------------------------- NWB


def write_nwb(path: Path, traces: NDArray[np.int16], compress: bool) -> Dict[str, Any]:
    """An NWB file as a lab's conversion writes it: an ElectricalSeries of int16 counts with
    conversion and channel_conversion to volts and an electrodes table with channel names;
    a second TimeSeries; trials; an events table of notes."""
    pynwb = need("pynwb", "pynwb")
    from datetime import datetime, timezone

    from hdmf.backends.hdf5.h5_utils import H5DataIO
    from pynwb.ecephys import ElectricalSeries

    nwb = pynwb.NWBFile(session_description="replay test", identifier="replay-test", session_start_time=datetime(2024, 1, 1, tzinfo=timezone.utc))
    dev = nwb.create_device(name="probe")
    group = nwb.create_electrode_group(name="shank0", description="", location="CA1", device=dev)
    nwb.add_electrode_column(name="channel_name", description="the channel's name")
    n = traces.shape[1]
    for i in range(n):
        nwb.add_electrode(group=group, location="CA1", channel_name=f"A-{i:03d}")
    region = nwb.create_electrode_table_region(list(range(n)), "all")
    cc = np.array([1.0] * (n // 2) + [0.5] * (n - n // 2), dtype=np.float32)
    data = H5DataIO(traces, compression="gzip", chunks=(1000, n)) if compress else traces
    nwb.add_acquisition(ElectricalSeries(name="ElectricalSeriesRaw", data=data, electrodes=region, starting_time=0.0, rate=RATE, conversion=0.195e-6, channel_conversion=cc, offset=0.0))
    nwb.add_acquisition(pynwb.TimeSeries(name="breathing", data=np.arange(100, dtype=np.float32), unit="a.u.", rate=100.0))
    # irregular samples: timestamps instead of a rate
    t = np.cumsum(np.linspace(0.005, 0.015, 50))
    nwb.add_acquisition(pynwb.TimeSeries(name="pressure", data=np.sin(t), unit="Pa", timestamps=t))
    nwb.add_trial_column(name="condition", description="stimulus")
    nwb.add_trial(start_time=0.01, stop_time=0.02, condition="left")
    nwb.add_trial(start_time=0.1, stop_time=0.15, condition="right")
    notes = nwb.create_events_table(name="notes", description="the experimenter's notes")
    notes.add_column(name="annotation", description="what happened")
    notes.add_row(timestamp=0.05, annotation="lights off")
    with pynwb.NWBHDF5IO(str(path), "w") as io:
        io.write(nwb)
    return {"cc": cc}


@pytest.mark.parametrize("compress", [False, True], ids=["contiguous", "gzip-chunked"])
def test_nwb_replays_bit_identical_with_pynwbs_names_and_gains(tmp_path: Path, stream_name: str, compress: bool) -> None:
    pynwb = need("pynwb", "pynwb")
    traces = ground_truth(16, 0.2, 0.195)
    write_nwb(tmp_path / "s.nwb", traces, compress)

    out = replay(str(tmp_path / "s.nwb"), "--fast", "--stream", stream_name)
    assert out.returncode != 0
    assert "holds 3 series; pick one with --series: ElectricalSeriesRaw, breathing, pressure" in out.stderr
    s, data, events, report = replayed(tmp_path / "s.nwb", stream_name, "--series", "ElectricalSeriesRaw")
    assert report["format"] == "nwb" and report["samples"] == len(traces)
    with pynwb.NWBHDF5IO(str(tmp_path / "s.nwb"), "r") as io:
        nwb = io.read()
        es = nwb.acquisition["ElectricalSeriesRaw"]
        np.testing.assert_array_equal(data, es.data[:])
        assert s.dtype == np.int16 and s.sfreq == es.rate
        table = es.electrodes.table
        assert s.ch_names == [table["channel_name"][i] for i in es.electrodes.data[:]]
        gain, offset = rtloop.replay.scale(s)
        np.testing.assert_array_equal(gain, es.conversion * es.channel_conversion[:].astype(float) * 1e6)
        np.testing.assert_array_equal(offset, 0.0)
        assert set(s.ch_units) == {"uV"} and es.unit == "volts"
    # trials (type "trials", value the condition, duration in samples) and the notes table
    assert [(e.type, e.value, e.sample, e.duration) for e in events] == [
        ("trials", "left", 300, 300),
        ("notes", "lights off", 1500, 0),
        ("trials", "right", 3000, 1500),
    ]


def test_nwb_bad_input_says_what_is_wrong(tmp_path: Path, stream_name: str) -> None:
    traces = np.zeros((10, 2), dtype=np.int16)
    write_nwb(tmp_path / "s.nwb", traces, False)
    out = replay(str(tmp_path / "s.nwb"), "--series", "nope", "--fast", "--stream", stream_name)
    assert out.returncode != 0 and "has no series \"nope\"; it has: ElectricalSeriesRaw, breathing, pressure" in out.stderr
    (tmp_path / "bad.nwb").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
    out = replay(str(tmp_path / "bad.nwb"), "--fast", "--stream", stream_name)
    assert out.returncode != 0 and "could not read it as NWB" in out.stderr
    # a Python without rtloop's package: the NWB reader is a module of the package, and the
    # error says how to point rtloop at a Python that has it
    bare = os.path.join(sys.base_prefix, "bin", "python3")
    env = dict(os.environ, RTLOOP_PYTHON=bare)
    # (the executable itself: the console script would set RTLOOP_PYTHON to its own Python)
    from rtloop._cli import executable

    out = subprocess.run([str(executable()), "replay", str(tmp_path / "s.nwb"), "--fast", "--stream", stream_name],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode != 0 and "NWB is read by rtloop's Python package" in out.stderr, out.stderr


def test_nwb_series_with_timestamps_plays_at_its_stamps(tmp_path: Path, stream_name: str) -> None:
    pynwb = need("pynwb", "pynwb")
    write_nwb(tmp_path / "s.nwb", np.zeros((10, 2), dtype=np.int16), False)
    # paced by its timestamps (20x), one channel, float64 as stored
    out = replay(str(tmp_path / "s.nwb"), "--series", "pressure", "--speed", "20", "--keep", "--stream", stream_name)
    assert out.returncode == 0, out.stderr
    assert abs(json.loads(out.stdout)["recorded_seconds"] - 0.495) < 1e-6
    s = rtloop.Stream.open(stream_name)
    data, _ = s.reader().read(0, s.written)
    with pynwb.NWBHDF5IO(str(tmp_path / "s.nwb"), "r") as io:
        ts = io.read().acquisition["pressure"]
        np.testing.assert_array_equal(data[:, 0], ts.data[:])
        assert s.dtype == np.float64 and s.n_channels == 1 and s.ch_units == ["Pa"]
        assert abs(s.sfreq - (len(ts.timestamps) - 1) / (ts.timestamps[-1] - ts.timestamps[0])) < 1e-9


def test_play_from_python_runs_in_process_and_returns_the_commands_report(tmp_path: Path, make_name: Callable[[], str]) -> None:
    """`rtloop.replay.play` plays a file with the library `rtloop replay` runs, in this
    process: the stream exists when it returns, holds the file's samples bit for bit, and the
    reports are the command's."""
    traces = (np.arange(3000 * 5) % 2000 - 1000).astype(np.int16).reshape(3000, 5)
    bin_path = write_spikeglx(tmp_path / "run", traces, [500] * 384)
    name = make_name()
    # kept: as fast as possible it may end before the open below (it would end with the replay)
    with rtloop.replay.play(bin_path, stream=name, speed=None, keep=True) as r:
        assert r.streams == [name]
        s = rtloop.Stream.open(name)  # it exists on return
        assert r.wait(60)
    assert r.reports is not None
    [report] = r.reports
    rtloop.reports.ReplayReport.check(report)
    assert (report.stream, report.samples, report.format) == (name, 3000, "spikeglx")
    data, _ = s.reader().read(0, 3000)
    np.testing.assert_array_equal(data, traces)
    cli = replay(str(bin_path), "--fast", "--stream", make_name())
    assert cli.returncode == 0, cli.stderr
    assert set(json.loads(cli.stdout)) == set(report)


def _recording(tmp_path: Path, name: str, chunks: int, per_chunk: int) -> Path:
    """An rtloop recording of a 1000 Hz stream written in `chunks` chunks of `per_chunk`
    samples, each chunk stamped with its last sample's time (as a device delivers it)."""
    s = rtloop.Stream.create(name, n_channels=2, dtype="float32", sfreq=1000.0)
    w = s.writer()
    with rtloop.record(name, tmp_path / "rec") as rec:
        t0 = rtloop.local_clock()
        for k in range(chunks):
            w.push_chunk(np.full((per_chunk, 2), k, np.float32), timestamp=t0 + (k + 1) * per_chunk / 1000.0)
        w.close()  # the recording ends by itself once it has everything
        deadline = time.monotonic() + 60
        while rec.running:
            assert time.monotonic() < deadline, "the recorder did not end with its writer"
            time.sleep(0.01)
        [report] = rec.stop()
    assert report.samples == chunks * per_chunk
    return tmp_path / "rec" / name


@pytest.mark.parametrize("chunks,per_chunk", [(1, 100), (10, 100)])
def test_paced_replay_plays_from_the_first_sample_to_the_last(
    tmp_path: Path, make_name: Callable[[], str], chunks: int, per_chunk: int
) -> None:
    """At speed 1 a replay takes the file's span, its first sample to its last: 0.099 s for
    one chunk of 100 samples at 1000 Hz (it took 1 ms), 0.999 s for ten (0.9 s). A loaded
    machine can only make a replay take longer, so each bound holds from below; the last
    sample's commit is held against the clock read before the replay began."""
    path = _recording(tmp_path, make_name(), chunks, per_chunk)
    span = (chunks * per_chunk - 1) / 1000.0
    name = make_name()
    before = rtloop.local_clock()
    r = rtloop.replay.play(path, stream=name, speed=1.0, keep=True)
    assert r.wait(120)
    [report] = r.stop()
    assert report.samples == chunks * per_chunk
    assert abs(report.recorded_seconds - span) < 1e-6, report
    assert report.seconds >= span - 1e-6, report
    s = rtloop.Stream.open(name)
    rd = s.reader()
    data, _ = rd.read(0, s.written)
    np.testing.assert_array_equal(data[:, 0], np.repeat(np.arange(chunks), per_chunk))
    # the replayed stream's own stamps (each commit's, without back-dating): the last sample
    # was committed no earlier than its time at the file's pace
    last = rd.read(s.written - 1, s.written)[1][0]
    assert last - before >= span - 1e-6, (last - before, span)


def test_play_paced_can_be_stopped_and_keeps_what_it_wrote(tmp_path: Path, make_name: Callable[[], str]) -> None:
    traces = np.zeros((int(RATE) * 20, 5), dtype=np.int16)  # 20 s at the original pace
    bin_path = write_spikeglx(tmp_path / "run", traces, [500] * 384)
    name = make_name()
    r = rtloop.replay.play(bin_path, stream=name, keep=True)
    assert r.running and not r.wait(0.3)
    [report] = r.stop()
    assert not r.running and 0 < report.samples < len(traces)
    assert rtloop.Stream.open(name).written == report.samples


@pytest.mark.parametrize(
    "kwargs,exc,message",
    [
        ({"speed": 0}, ValueError, "speed=0: a number > 0"),
        ({"capacity": 0}, ValueError, "capacity=0: at least 1 sample"),
        ({"stream": "bad/name"}, ValueError, 'stream name "bad/name"'),
        ({"series": "lf"}, ValueError, "has no series \"lf\""),
        ({"series": ["ap", "ap"]}, ValueError, "two series would play into stream"),
    ],
)
def test_play_refuses_bad_input_before_anything_plays(
    tmp_path: Path, kwargs: Dict[str, Any], exc: type, message: str
) -> None:
    bin_path = write_spikeglx(tmp_path / "run", np.zeros((300, 5), dtype=np.int16), [500] * 384)
    before = set(rtloop.Stream.list())
    with pytest.raises(exc) as e:
        rtloop.replay.play(bin_path, **kwargs)
    assert message in str(e.value)
    assert set(rtloop.Stream.list()) == before


def test_play_of_a_missing_file_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="no-such.bin"):
        rtloop.replay.play(tmp_path / "no-such.bin")
