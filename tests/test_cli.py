"""The `rtloop` command as pip installs it (the console script runs the Rust CLI in-process
through the native module; child processes re-run it as `python -m rtloop`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, List

import numpy as np
import pytest

import rtloop


def rtloop_cmd() -> List[str]:
    # the console script installed beside this interpreter, else whatever is on PATH
    beside = Path(sys.executable).parent / "rtloop"
    exe = os.environ.get("RTLOOP_BIN") or (str(beside) if beside.exists() else shutil.which("rtloop"))
    if exe is None:
        pytest.fail("the rtloop command is not on PATH: install the package (bash scripts/python-dev.sh)")
    return [exe]


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*rtloop_cmd(), *args], capture_output=True, text=True, timeout=timeout)


def test_help_lists_every_command() -> None:
    out = run("--help")
    assert out.returncode == 0
    for cmd in ("demo", "stream", "verify", "bench", "sys-info"):
        assert cmd in out.stdout


def test_version_matches_the_package() -> None:
    out = run("--version")
    assert out.returncode == 0
    assert out.stdout.split()[-1] == rtloop.__version__


def test_stream_commands_round_trip_and_python_sees_the_stream(stream_name: str) -> None:
    out = run("stream", "create", stream_name, "--dtype", "float64", "--channels", "2",
              "--rate", "250", "--capacity", "512", "--ch-names", "x,y")
    assert out.returncode == 0, out.stderr
    s = rtloop.Stream.open(stream_name)
    assert (s.n_channels, s.sfreq, s.ch_names) == (2, 250.0, ["x", "y"])
    w = s.writer()
    w.push_chunk(np.arange(8, dtype=np.float64).reshape(4, 2))
    listed = json.loads(run("--json", "stream", "list").stdout)
    me = next(e for e in listed if e["name"] == stream_name)
    assert me["stats"]["written"] == 4
    assert me["stats"]["writer"]["state"] == "active"
    assert me["stats"]["writer"]["pid"] == os.getpid()
    info = run("stream", "info", stream_name)
    assert info.returncode == 0 and "written     4 samples" in info.stdout
    w.close()
    # the clean close ended the stream: its name is gone without being removed by hand
    assert stream_name not in rtloop.Stream.list()
    assert run("stream", "create", stream_name, "--channels", "1").returncode == 0
    assert run("stream", "remove", stream_name).returncode == 0
    assert stream_name not in rtloop.Stream.list()


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["stream", "create", "a/b", "--channels", "1", "--capacity", "8"], 1, "contains '/'"),
        (["stream", "create", "ok-name", "--channels", "1", "--capacity", "0"], 1, "capacity must be at least 1"),
        (["stream", "create", "ok-name", "--dtype", "int128", "--channels", "1", "--capacity", "8"], 2, "allowed: int8"),
        (["stream", "info", "no-such-stream-here"], 1, "no stream named"),
        (["demo", "--seconds=-1"], 2, "expected a number > 0"),
    ],
)
def test_bad_input_gets_exit_code_and_reason(args: List[str], code: int, words: str) -> None:
    out = run(*args)
    assert out.returncode == code, out.stdout + out.stderr
    assert words in out.stdout + out.stderr
    assert "ok-name" not in rtloop.Stream.list()


def test_demo_runs_with_its_reader_in_another_process(tmp_path: Path) -> None:
    out = run("--json", "demo", "--seconds", "1", "--plot", str(tmp_path))
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["errors"] == 0
    assert summary["channels"] == 384 and summary["dtype"] == "int16"
    assert summary["samples_read"] + summary["samples_lost"] == summary["samples_written"] == 30000
    for png in ("demo-latency.png", "demo-occupancy.png"):
        data = (tmp_path / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert summary["stream"] not in rtloop.Stream.list()


def test_sys_info_json() -> None:
    out = run("--json", "sys-info")
    assert out.returncode == 0, out.stderr
    facts = json.loads(out.stdout)
    assert facts["rtloop"] == rtloop.__version__
    assert facts["cpus"] >= 1


def test_python_dash_m_runs_the_same_command() -> None:
    out = subprocess.run([sys.executable, "-m", "rtloop", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "sys-info" in out.stdout


def _no_panic(out: subprocess.CompletedProcess[str]) -> None:
    assert "panicked" not in out.stderr, out.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--bind", "127.0.0.1:0", "--duration", "1e300"],
        ["serve", "--bind", "127.0.0.1:0", "--message-timeout", "1e300"],
        ["view", "--port", "0", "--duration", "1e300"],
        ["record", "no-such-stream-here", "--out", "{tmp}", "--seconds", "1e300"],
        ["record", "no-such-stream-here", "--out", "{tmp}", "--split-seconds", "1e300"],
        ["bridge", "brainflow-in", "--board", "synthetic", "--seconds", "1e300"],
        ["bridge", "brainflow-in", "--board", "synthetic", "--stall", "1e300"],
        ["bridge", "lsl-in", "name=x", "--seconds", "1e300"],
        ["bridge", "lsl-out", "no-such-stream-here", "--seconds", "1e300"],
    ],
)
def test_a_duration_too_long_is_refused_with_the_allowed_range(args: List[str], tmp_path: Path) -> None:
    out = run(*[a.replace("{tmp}", str(tmp_path / "rec")) for a in args], timeout=60)
    _no_panic(out)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "expected a number of seconds > 0 and at most 1e9" in out.stderr, out.stderr
    assert not (tmp_path / "rec").exists()


def _fake_recording(d: Path, stamps: List[int]) -> Path:
    """A recording directory as `rtloop record` writes it: one float32 channel, one sample
    per stamp."""
    d.mkdir()
    n = len(stamps)
    header = {
        "format": "rtloop-recording", "version": 1, "stream": "fake", "dtype": "float32",
        "n_channels": 1, "ch_names": ["a"], "ch_units": [""], "sfreq": 1000.0,
        "first_sample": 0, "start_monotonic_ns": 0, "start_unix_ns": 0, "samples": n,
        "events": 0, "lost_samples": 0, "gaps": [], "complete": True, "ended": "stopped",
        "rtloop_version": rtloop.__version__,
    }
    (d / "header.json").write_text(json.dumps(header))
    np.arange(n, dtype=np.float32).tofile(d / "data.bin")
    np.array(stamps, dtype=np.uint64).tofile(d / "timestamps.bin")
    (d / "events.jsonl").write_text("")
    return d


def test_replay_refuses_a_fifo_instead_of_hanging(tmp_path: Path, stream_name: str) -> None:
    fifo = tmp_path / "x.bin"
    os.mkfifo(fifo)
    out = run("replay", str(fifo), "--stream", stream_name, timeout=60)
    assert out.returncode == 1, out.stderr
    assert "is a FIFO (named pipe), not a regular file" in out.stderr, out.stderr
    # a FIFO where a recording's samples should be
    rec = _fake_recording(tmp_path / "rec", [0, 1000])
    (rec / "data.bin").unlink()
    os.mkfifo(rec / "data.bin")
    out = run("replay", str(rec), "--stream", stream_name, timeout=60)
    assert out.returncode == 1, out.stderr
    assert "data.bin: is a FIFO" in out.stderr, out.stderr


def test_replay_refuses_a_wait_of_a_billion_seconds(tmp_path: Path, stream_name: str) -> None:
    """A timestamp jump of 1e9 s, or a rate of 1e-9 Hz: a paced replay would wait silently
    for 31 years; it stops with what is wrong instead (--fast still plays it)."""
    rec = _fake_recording(tmp_path / "rec", [0, 1000, 10**18 + 1000])
    out = run("replay", str(rec), "--stream", stream_name, timeout=60)
    assert out.returncode == 1, out.stderr
    assert "sample 2 is due 1.000e9 s after the sample before it" in out.stderr, out.stderr
    assert "--fast" in out.stderr and "at most 86400 s" in out.stderr, out.stderr
    out = run("--json", "replay", str(rec), "--stream", stream_name, "--fast", timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["samples"] == 3
    assert stream_name not in rtloop.Stream.list(), "the stream ended with its replay"
    # a SpikeGLX file whose .meta says 1e-9 Hz
    bin_path = tmp_path / "slow.nidq.bin"
    np.zeros(2, dtype=np.int16).tofile(bin_path)
    meta = {"nSavedChans": 1, "niSampRate": "1e-9", "typeThis": "nidq", "niAiRangeMax": 5,
            "snsMnMaXaDw": "0,0,1,0", "fileSizeBytes": 4}
    bin_path.with_suffix(".meta").write_text("".join(f"{k}={v}\n" for k, v in meta.items()))
    out = run("replay", str(bin_path), "--stream", stream_name, timeout=60)
    assert out.returncode == 1, out.stderr
    assert "sample 1 is due 1.000e9 s" in out.stderr and "rate (0.000000001 Hz)" in out.stderr, out.stderr


def test_stream_remove_removes_all_it_can_and_names_each_failure(make_name: Callable[[], str]) -> None:
    a, b, c = make_name(), make_name(), make_name()
    for n in (a, c):
        assert run("stream", "create", n, "--channels", "1", "--capacity", "8").returncode == 0
    out = run("stream", "remove", a, b, c)
    assert out.returncode == 1, out.stdout + out.stderr
    assert a not in rtloop.Stream.list() and c not in rtloop.Stream.list()
    assert f"removed {a}" in out.stdout and f"removed {c}" in out.stdout
    assert f'cannot remove "{b}"' in out.stderr and "1 of 3 streams not removed" in out.stderr, out.stderr


def test_an_error_says_its_cause_once(tmp_path: Path) -> None:
    out = run("record", "no-such-stream-here", "--out", str(tmp_path / "rec"))
    assert out.returncode == 1, out.stderr
    assert out.stderr.count("no stream named") == 1, out.stderr
    _no_panic(out)


def _as_nobody(path: Path) -> str:
    """Connect to `path` as uid 65534 (a forked child) and send GET_HDR: "served",
    "closed" (the server hung up without a reply) or "EACCES" (the file mode said no)."""
    import errno
    import socket
    import struct

    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 3
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(30)
            try:
                s.connect(str(path))
                s.sendall(struct.pack("<HHI", 1, 0x201, 0))
                code = 0 if s.recv(8) else 1
            except OSError as e:
                # the server may hang up before the request is sent (EPIPE) or read (ECONNRESET)
                closed = e.errno in (errno.ECONNRESET, errno.EPIPE)
                code = 2 if e.errno == errno.EACCES else (1 if closed else 10 + (e.errno or 0))
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return {0: "served", 1: "closed", 2: "EACCES"}.get(code, f"error (exit {code})")


def test_serve_unix_socket_is_owner_only_and_refuses_other_users(stream_name: str) -> None:
    import socket
    import stat
    import struct
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("acting as another user needs root")
    d = Path(tempfile.mkdtemp(prefix="rtloop-ftsock-"))
    d.chmod(0o755)  # another user may reach the socket file; its own mode decides
    path = d / "ft.sock"
    p = subprocess.Popen(
        [*rtloop_cmd(), "serve", "--no-tcp", "--unix", str(path), "--stream", stream_name, "--duration", "300"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.umask(0),
    )
    try:
        assert p.stdout is not None and "listening" in p.stdout.readline()
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert _as_nobody(path) == "EACCES"
        # a socket another user can reach after all (a chmod, a copy in a shared place): the
        # server itself refuses the other user
        os.chmod(path, 0o777)
        assert _as_nobody(path) == "closed"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(30)
            s.connect(str(path))
            s.sendall(struct.pack("<HHI", 1, 0x201, 0))
            assert len(s.recv(8)) == 8, "this user is served"
    finally:
        p.terminate()
        p.communicate(timeout=60)
        shutil.rmtree(d, ignore_errors=True)
