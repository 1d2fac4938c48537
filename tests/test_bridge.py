"""`rtloop.bridge`: the LSL and BrainFlow bridges called from Python, in this process (no
`rtloop` child), against the real peers: pylsl's liblsl and the brainflow wheel's
libBoardController. Each returns the report `rtloop bridge ... --json` prints, typed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List

import numpy as np
import pytest

import rtloop
import rtloop.bridge

from _lsl_probe import push_until_flowing, without_probes
from _peers import need
from rtloop.reports import BrainFlowBridgeReport, LslBridgeReport

pytestmark = pytest.mark.timeout(180)


def uname(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def _child_pids() -> List[int]:
    pids: List[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        pids += [int(x) for x in (task / "children").read_text().split()]
    return pids


@pytest.fixture
def prefix() -> Iterator[str]:
    """A stream name prefix; every stream under it is removed afterwards."""
    p = uname("br")
    yield p
    for name in rtloop.Stream.list():
        if name.startswith(p):
            rtloop.Stream.remove(name)


# ---- LSL ------------------------------------------------------------------------------


def test_an_lsl_outlet_becomes_a_stream_and_the_report_is_the_commands(prefix: str) -> None:
    pylsl = need("pylsl", "pylsl")
    info = pylsl.StreamInfo(prefix, "EEG", 4, 1000.0, "float32", f"src-{prefix}")
    out = pylsl.StreamOutlet(info)
    before = _child_pids()
    with rtloop.bridge.lsl_in(prefix, by="name", stream=prefix) as b:
        assert _child_pids() == before, "the bridge runs in this process"
        assert b.streams == [prefix] and b.running
        assert prefix in b.description and "liblsl" in b.description
        assert out.wait_for_consumers(10)
        data = np.arange(4000, dtype=np.float32).reshape(1000, 4)
        for i in range(0, 1000, 100):
            out.push_chunk(data[i : i + 100])
        stream = rtloop.Stream.open(prefix)
        deadline = time.time() + 20
        while stream.written < 1000 and time.time() < deadline:
            time.sleep(0.05)
        got, _ = stream.reader().read(0, 1000)
        np.testing.assert_array_equal(got, data)
    report = b.report
    assert isinstance(report, LslBridgeReport)
    LslBridgeReport.check(report)
    assert (report.samples, report.stream, report.outages) == (1000, prefix, 0)
    assert not b.running
    assert b.stop() == report, "stop() again gives the same report"
    # not keep: the stream went with the bridge
    assert prefix not in rtloop.Stream.list()


def test_a_stream_becomes_an_lsl_outlet_a_pylsl_inlet_reads(prefix: str) -> None:
    pylsl = need("pylsl", "pylsl")
    s = rtloop.Stream.create(prefix, n_channels=2, dtype="int16", sfreq=250.0, capacity=4096)
    w = s.writer()
    b = rtloop.bridge.lsl_out(prefix, name=prefix, type="EMG")
    try:
        found = pylsl.resolve_byprop("name", prefix, 1, 10)
        assert found and found[0].type() == "EMG"
        inlet = pylsl.StreamInlet(found[0])
        inlet.open_stream(5)
        probe = np.full((1, 2), -1, np.int16)
        probes = push_until_flowing(w, inlet, probe)
        data = np.arange(600, dtype=np.int16).reshape(300, 2)
        w.push_chunk(data)
        got: List[Any] = []
        deadline = time.time() + 20
        while len(without_probes(got, probe, np.int16) if got else []) < 300 and time.time() < deadline:
            chunk, _ = inlet.pull_chunk(timeout=0.5)
            if chunk:
                got.append(np.asarray(chunk, dtype=np.int16))
        np.testing.assert_array_equal(without_probes(got, probe, np.int16), data)
    finally:
        report = b.stop()
    LslBridgeReport.check(report)
    assert report.samples == probes + 300


def test_lsl_bad_input_gets_the_exception_that_says_what_was_wrong(prefix: str) -> None:
    need("pylsl", "pylsl")
    # no outlet of that name within the timeout: TimeoutError naming the query
    with pytest.raises(TimeoutError, match=f"no LSL outlet with name \"{prefix}-absent\""):
        rtloop.bridge.lsl_in(f"{prefix}-absent", by="name", timeout=0.5)
    with pytest.raises(ValueError, match='by="both": use "name", "type" or None'):
        rtloop.bridge.lsl_in("x", by="both")
    with pytest.raises(ValueError, match="timeout=0: a number of seconds > 0"):
        rtloop.bridge.lsl_in("x", timeout=0)
    # a stream LSL cannot carry: ValueError with what it can carry
    rtloop.Stream.create(prefix, n_channels=1, dtype="uint16", sfreq=100.0, capacity=1024)
    with pytest.raises(ValueError, match="uint16 has no LSL channel format"):
        rtloop.bridge.lsl_out(prefix)
    # a stream that does not exist: the stream's own exception
    with pytest.raises(rtloop.StreamNotFoundError, match=f"cannot open stream \"{prefix}-none\""):
        rtloop.bridge.lsl_out(f"{prefix}-none")
    # the stream it would create exists: StreamExistsError, and the stream is kept
    pylsl = need("pylsl", "pylsl")
    out = pylsl.StreamOutlet(pylsl.StreamInfo(f"{prefix}-o", "EEG", 1, 100.0, "float32", "x"))
    with pytest.raises(rtloop.StreamExistsError):
        rtloop.bridge.lsl_in(f"{prefix}-o", by="name", stream=prefix, timeout=10)
    assert rtloop.Stream.open(prefix).dtype == np.dtype("uint16")
    del out


# ---- BrainFlow --------------------------------------------------------------------------


def _playback_file(tmp_path: Path) -> Path:
    from brainflow.board_shim import BoardIds, BoardShim
    from brainflow.data_filter import DataFilter

    syn = BoardIds.SYNTHETIC_BOARD.value
    rows, n = BoardShim.get_num_rows(syn), 300
    data = (np.arange(rows * n).reshape(rows, n) % 4000) * 0.25
    data[BoardShim.get_package_num_channel(syn)] = np.arange(n) % 256
    data[BoardShim.get_timestamp_channel(syn)] = 1_700_000_000.5
    marker = BoardShim.get_marker_channel(syn)
    data[marker] = 0.0
    data[marker, 10] = 3.0
    path = tmp_path / "synthetic.csv"
    DataFilter.write_file(data, str(path), "w")
    return path


def test_a_playback_file_through_the_python_bridge_matches_the_command(tmp_path: Path, prefix: str) -> None:
    need("brainflow", "brainflow")
    path = _playback_file(tmp_path)
    b = rtloop.bridge.brainflow_in("PLAYBACK_FILE_BOARD", file=str(path), master_board="synthetic",
                                   config=["old_timestamps"], name=prefix, keep=True)
    assert f"{prefix}.eeg" in b.streams and f"{prefix}.board" in b.streams
    assert b.wait(120), "the playback board ends at the end of its file"
    report = b.stop()
    BrainFlowBridgeReport.check(report)
    assert (report.samples, report.markers, report.ended) == (300, 1, "end of file")
    ours = {n: np.asarray(rtloop.Stream.open(n).reader().read(0, 300)[0]) for n in b.streams}
    for n in b.streams:
        rtloop.Stream.remove(n)
    # the command, on the same file, writes the same samples and prints the same report
    cli = subprocess.run(
        [sys.executable, "-m", "rtloop", "--json", "bridge", "brainflow-in", "--board", "PLAYBACK_FILE_BOARD",
         "--file", str(path), "--master-board", "synthetic", "--config", "old_timestamps",
         "--name", prefix, "--keep"],
        capture_output=True, text=True, timeout=120,
    )
    assert cli.returncode == 0, cli.stderr
    import json

    theirs: Dict[str, Any] = json.loads(cli.stdout)
    assert set(theirs) == set(report)
    assert {k: v for k, v in theirs.items() if k != "samples_by_preset"} == {
        k: v for k, v in report.items() if k != "samples_by_preset"
    }
    for n, data in ours.items():
        np.testing.assert_array_equal(np.asarray(rtloop.Stream.open(n).reader().read(0, 300)[0]), data)


def test_the_synthetic_board_streams_until_stopped(prefix: str) -> None:
    need("brainflow", "brainflow")
    with rtloop.bridge.brainflow_in("synthetic", name=prefix) as b:
        r = rtloop.Stream.open(f"{prefix}.eeg").reader(mode="lossless")
        data, _ = r.pull_chunk(max_samples=50, timeout=30)
        assert data.shape[1] == 16 and len(data) > 0
    assert b.report is not None and b.report.samples > 0 and b.report.ended == "stopped"
    assert not [n for n in rtloop.Stream.list() if n.startswith(prefix)]


@pytest.mark.parametrize(
    "board,options,exc,message",
    [
        ("cytom", {}, ValueError, 'unknown BrainFlow board "cytom"'),
        ("CYTON_BOARD", {}, ValueError, "board CYTON_BOARD (0) needs --serial-port"),
        ("playback_file", {"master_board": "synthetic"}, ValueError, "needs --file"),
        ("playback_file", {"file": "/nonexistent/x.csv", "master_board": "synthetic"}, ValueError,
         "playback file /nonexistent/x.csv: cannot read it"),
        ("synthetic", {"stall": 0}, ValueError, "stall=0: a number of seconds > 0"),
        ("synthetic", {"timeout": -1}, ValueError, "BrainFlow parameters: invalid value: integer `-1`"),
        ("synthetic", {"config": "old_timestamps"}, TypeError, "config: a list of strings"),
        ("cyton", {"serial_port": "/dev/rtloop-no-such-port"}, RuntimeError,
         "BrainFlow prepare_session failed for board CYTON_BOARD (0)"),
    ],
)
def test_brainflow_bad_input_gets_the_exception_that_says_what_was_wrong(
    board: str, options: Dict[str, Any], exc: type, message: str, prefix: str
) -> None:
    need("brainflow", "brainflow")
    with pytest.raises(exc) as e:
        rtloop.bridge.brainflow_in(board, name=prefix, **options)
    assert message in str(e.value)
    assert not [n for n in rtloop.Stream.list() if n.startswith(prefix)]


def test_brainflow_boards_name_what_each_needs() -> None:
    boards = {b.name: b for b in rtloop.bridge.brainflow_boards()}
    assert boards["SYNTHETIC_BOARD"].id == -1 and boards["SYNTHETIC_BOARD"].needs == []
    assert boards["CYTON_BOARD"].needs == ["serial_port"]
    assert set(boards["PLAYBACK_FILE_BOARD"].needs) == {"file", "master_board"}
