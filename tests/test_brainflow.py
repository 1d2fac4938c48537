"""BrainFlow boards into rtloop streams, against the real BrainFlow (the brainflow wheel from
PyPI, whose libBoardController rtloop loads): `rtloop bridge brainflow-in` as a process and a
model with `driver: brainflow`, on BrainFlow's synthetic and playback-file boards (no
hardware). What rtloop's streams hold is checked against what BrainFlow itself yields."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator, List

import numpy as np
import pytest

import rtloop
from _peers import need

brainflow = need("brainflow", "brainflow")
from brainflow.board_shim import BoardIds, BoardShim, BrainFlowInputParams  # noqa: E402
from brainflow.data_filter import DataFilter  # noqa: E402

pytestmark = pytest.mark.timeout(180)

SYN = BoardIds.SYNTHETIC_BOARD.value
N = 300


def uname(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def prefix() -> Iterator[str]:
    """A stream prefix; every stream under it is removed afterwards."""
    p = uname("bf")
    yield p
    for name in rtloop.Stream.list():
        if name.startswith(p + ".") or name.startswith(p + "-"):
            rtloop.Stream.remove(name)


def bridge(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rtloop", "bridge", "brainflow-in", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_ready(p: subprocess.Popen[str]) -> str:
    """The bridge prints one `bridging ...` line on stderr when it is ready."""
    assert p.stderr is not None
    seen = []
    while True:
        line = p.stderr.readline()
        if not line:
            raise AssertionError("the bridge ended before it was ready:\n" + "".join(seen))
        if line.startswith("bridging"):
            return line
        seen.append(line)


def playback_file(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """A file of N synthetic-board samples written by BrainFlow's DataFilter.write_file:
    known values (exact in decimal), package numbers 0..255, one timestamp for all (so the
    playback board plays it at once), markers at samples 10 and 200."""
    rows = BoardShim.get_num_rows(SYN)
    data = np.zeros((rows, N))
    data[:] = (np.arange(rows * N).reshape(rows, N) % 4000) * 0.25
    data[BoardShim.get_package_num_channel(SYN)] = np.arange(N) % 256
    data[BoardShim.get_timestamp_channel(SYN)] = 1_700_000_000.5
    marker = BoardShim.get_marker_channel(SYN)
    data[marker] = 0.0
    data[marker, 10], data[marker, 200] = 1.0, 20.0
    path = tmp_path / "synthetic.csv"
    DataFilter.write_file(data, str(path), "w")
    return path, data


def brainflow_playback(path: Path) -> np.ndarray:
    """What BrainFlow's own playback board yields for the file (old timestamps kept)."""
    params = BrainFlowInputParams()
    params.file = str(path)
    params.master_board = SYN
    board = BoardShim(BoardIds.PLAYBACK_FILE_BOARD.value, params)
    board.prepare_session()
    try:
        board.config_board("old_timestamps")
        board.start_stream()
        while board.get_board_data_count() < N:
            time.sleep(0.01)
        return board.get_board_data()
    finally:
        board.release_session()


def read(name: str) -> np.ndarray:
    s = rtloop.Stream.open(name)
    data, _ = s.reader().read(0, s.written)
    return np.asarray(data)


def test_a_playback_file_arrives_exactly_as_brainflow_plays_it_with_its_markers(
    tmp_path: Path, prefix: str
) -> None:
    path, written = playback_file(tmp_path)
    theirs = brainflow_playback(path)
    assert theirs.shape == written.shape
    p = bridge("--board", "PLAYBACK_FILE_BOARD", "--file", str(path), "--master-board", "synthetic",
               "--config", "old_timestamps", "--name", prefix, "--keep")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert "end of file" in out
    eeg_rows = BoardShim.get_eeg_channels(SYN)
    eeg = rtloop.Stream.open(f"{prefix}.eeg")
    assert eeg.written == N
    assert eeg.ch_names == BoardShim.get_eeg_names(SYN)
    assert eeg.ch_units == ["µV"] * len(eeg_rows)
    assert (eeg.sfreq, eeg.content_type) == (BoardShim.get_sampling_rate(SYN), "EEG")
    np.testing.assert_array_equal(read(f"{prefix}.eeg"), theirs[eeg_rows].T)
    np.testing.assert_array_equal(read(f"{prefix}.accel"), theirs[BoardShim.get_accel_channels(SYN)].T)
    np.testing.assert_array_equal(read(f"{prefix}.gyro"), theirs[BoardShim.get_gyro_channels(SYN)].T)
    assert rtloop.Stream.open(f"{prefix}.accel").ch_names == ["accel_x", "accel_y", "accel_z"]
    board = read(f"{prefix}.board")
    assert rtloop.Stream.open(f"{prefix}.board").ch_names == ["package_num", "timestamp", "marker"]
    np.testing.assert_array_equal(board[:, 0], theirs[BoardShim.get_package_num_channel(SYN)])
    np.testing.assert_array_equal(board[:, 1], theirs[BoardShim.get_timestamp_channel(SYN)])
    # BrainFlow's playback board drops the file's markers; rtloop puts them back, as events
    # on the eeg stream and in the board stream, at their samples
    marker = BoardShim.get_marker_channel(SYN)
    assert not theirs[marker].any()
    np.testing.assert_array_equal(board[:, 2], written[marker])
    r = rtloop.Stream.open(f"{prefix}.eeg").reader()
    events = [(e.sample, e.type, float(np.ravel(e.value)[0])) for e in r.read_events(0, r.events_written)]
    assert events == [(10, "marker", 1.0), (200, "marker", 20.0)]
    # every channel of the file is in exactly one stream
    names = [n for n in rtloop.Stream.list() if n.startswith(prefix + ".")]
    assert sum(rtloop.Stream.open(n).n_channels for n in names) == BoardShim.get_num_rows(SYN)


def test_the_synthetic_board_streams_until_stopped_and_its_streams_go_with_it(prefix: str) -> None:
    p = bridge("--board", "synthetic", "--name", prefix)
    try:
        line = wait_ready(p)
        assert f"{prefix}.eeg" in line and f"{prefix}.aux.accel" in line
        eeg = rtloop.Stream.open(f"{prefix}.eeg")
        r = eeg.reader(mode="lossless")
        data, stamps = r.pull_chunk(max_samples=50, timeout=30)
        assert data.shape[1] == 16 and len(data) > 0
        # BrainFlow's timestamps became the samples' stamps (rtloop's clock, seconds)
        assert np.all(np.diff(stamps) >= 0)
    finally:
        p.terminate()
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "lost samples" in out
    assert not [n for n in rtloop.Stream.list() if n.startswith(prefix + ".")]


def test_a_killed_bridge_restarts_over_the_streams_it_left(prefix: str) -> None:
    """SIGKILL leaves the bridge's streams with a dead writer; the next bridge of the same
    name reclaims them instead of refusing to start."""
    p = bridge("--board", "synthetic", "--name", prefix)
    try:
        wait_ready(p)
        before = sorted(n for n in rtloop.Stream.list() if n.startswith(prefix + "."))
        assert before
    finally:
        p.kill()
        p.communicate(timeout=60)
    left = sorted(n for n in rtloop.Stream.list() if n.startswith(prefix + "."))
    assert left == before, "a killed writer leaves its streams until they are reclaimed"
    q = bridge("--board", "synthetic", "--name", prefix)
    try:
        line = wait_ready(q)
        assert f"{prefix}.eeg" in line
        eeg = rtloop.Stream.open(f"{prefix}.eeg")
        assert eeg.state == "live"
        data, _ = eeg.reader(mode="lossless").pull_chunk(max_samples=10, timeout=30)
        assert len(data) > 0
    finally:
        q.terminate()
        _, err = q.communicate(timeout=60)
    assert q.returncode == 0, err


@pytest.mark.parametrize(
    "args,message",
    [
        (["--board", "cytom"], 'unknown BrainFlow board "cytom"'),
        (["--board", "CYTON_BOARD"], "board CYTON_BOARD (0) needs --serial-port"),
        (["--board", "cyton_wifi"], "needs --ip-port"),
        (["--board", "playback_file", "--master-board", "synthetic"], "needs --file"),
        (["--board", "playback_file", "--file", "/nonexistent/x.csv"], "needs --master-board"),
        (["--board", "playback_file", "--file", "/nonexistent/x.csv", "--master-board", "synthetic"],
         "playback file /nonexistent/x.csv: cannot read it"),
        (["--board", "cyton", "--serial-port", "/dev/rtloop-no-such-port"],
         "BrainFlow prepare_session failed for board CYTON_BOARD (0)"),
    ],
)
def test_bad_input_is_refused_saying_what_is_wrong(args: List[str], message: str, prefix: str) -> None:
    p = bridge(*args, "--name", prefix)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1, err
    assert message in err, err
    assert not [n for n in rtloop.Stream.list() if n.startswith(prefix + ".")]


def test_a_playback_file_of_another_board_is_refused(tmp_path: Path, prefix: str) -> None:
    path, _ = playback_file(tmp_path)
    p = bridge("--board", "playback_file", "--file", str(path), "--master-board", "cyton", "--name", prefix)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1
    assert "line 1 has 32 values; the master board's data has 24 rows" in err, err


def test_list_boards_names_every_board_and_what_it_needs() -> None:
    r = subprocess.run([sys.executable, "-m", "rtloop", "bridge", "brainflow-in", "--list-boards"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = {line.split()[1]: line for line in r.stdout.splitlines()}
    for b in BoardIds:
        if b.value != BoardIds.NO_BOARD.value:
            assert b.name in lines, b.name
    assert "--serial-port" in lines["CYTON_BOARD"]
    assert "--file --master-board" in lines["PLAYBACK_FILE_BOARD"]


def test_a_model_with_the_brainflow_driver_takes_a_playback_file_exactly(tmp_path: Path, prefix: str) -> None:
    path, _ = playback_file(tmp_path)
    theirs = brainflow_playback(path)
    model = tmp_path / "m.yaml"
    copy = f"{prefix}-copy"
    model.write_text(
        f"config: {{name: {prefix.replace('-', '_')}, tick_us: 1000}}\n"
        "signals:\n"
        "  eeg: {shape: [64, 16], dtype: float64, variable: true}\n"
        "  accel: {shape: [64, 3], dtype: float64, variable: true}\n"
        "sources:\n"
        "  amp:\n"
        "    driver: brainflow\n"
        "    out: [eeg, accel]\n"
        f"    options: {{board: playback_file, file: {path}, master_board: synthetic}}\n"
        "sinks:\n"
        f"  copy: {{driver: stream_out, in: [eeg], options: {{stream: {copy}, keep: true}}}}\n"
    )
    r = subprocess.run([sys.executable, "-m", "rtloop", "run", str(model), "--seconds", "3",
                        "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"received {N} samples from BrainFlow PLAYBACK_FILE_BOARD" in r.stdout + r.stderr
    got = read(copy)
    np.testing.assert_array_equal(got, theirs[BoardShim.get_eeg_channels(SYN)].T)


def test_a_model_refuses_a_kind_the_board_lacks_and_a_signal_of_the_wrong_width(tmp_path: Path, prefix: str) -> None:
    model = tmp_path / "m.yaml"
    for signal, kinds, message in [
        ("eeg: {shape: [64, 8], dtype: float64, variable: true}", "", "signal \"eeg\" has 8 channels; eeg of board SYNTHETIC_BOARD (-1) has 16"),
        ("eeg: {shape: [64, 16], dtype: float64, variable: true}", ", kinds: [ecg]", "has no \"ecg\" data; it has: eeg, accel"),
        ("eeg: {shape: [64, 16], dtype: float32, variable: true}", "", "must be float64"),
    ]:
        model.write_text(
            f"config: {{name: {prefix.replace('-', '_')}}}\n"
            f"signals:\n  {signal}\n"
            f"sources:\n  amp: {{driver: brainflow, out: [eeg], options: {{board: synthetic{kinds}}}}}\n"
        )
        r = subprocess.run([sys.executable, "-m", "rtloop", "run", str(model), "--seconds", "1",
                            "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
        assert r.returncode != 0
        assert message in r.stderr + r.stdout, r.stderr
