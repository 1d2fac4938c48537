"""The tick runtime from Python: Python modules (zero-copy views, history, returned outputs,
numba), every example model, and each bad input's message. Real processes, streams,
UDP sockets and SQLite files; no timing thresholds (only counts, data and messages)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import List, Tuple

import numpy as np
import pytest

import rtloop
import rtloop.reports
from _peers import need
import rtloop.runtime

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "models"

# a model pins its processes and the timer spins its busy-wait tail: never two at once
pytestmark = pytest.mark.timeout(300)


def unique(prefix: str) -> str:
    return f"{prefix}{os.getpid()}{uuid.uuid4().hex[:6]}"


def write(d: Path, name: str, text: str) -> Path:
    p = d / name
    p.write_text(textwrap.dedent(text))
    return p


def rtloop_run(model: Path, *args: str) -> Tuple[int, dict, str]:
    """Run ``rtloop --json run MODEL --quiet ARGS`` in the model's (temporary) directory, so
    the default output directory ``out/<model name>`` lands there; returns (exit code, report,
    stderr)."""
    p = subprocess.run(
        [sys.executable, "-m", "rtloop", "--json", "run", str(model), "--quiet", *args],
        cwd=model.parent,
        capture_output=True,
        text=True,
        timeout=240,
    )
    try:
        report = json.loads(p.stdout) if p.stdout.strip() else {}
    except json.JSONDecodeError:
        report = {}
    return p.returncode, report, p.stderr


def proc(report: dict, name: str) -> dict:
    return next(p for p in report["processes"] if p["name"] == name)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_python_module_gets_zero_copy_views_with_history_and_its_outputs_arrive(
    tmp_path: Path,
) -> None:
    name = unique("pyhist")
    write(
        tmp_path,
        "mod.py",
        """
        import numpy as np
        seen = []

        def step(raw, total, last):
            # raw: (4, 3, 2) history of 4 ticks of 3x2, oldest first, read-only
            assert raw.shape == (4, 3, 2) and raw.dtype == np.int32
            assert not raw.flags.writeable
            total[:] = raw.sum(axis=(0, 1))      # write into the view
            return_last = raw[-1, -1].astype(np.float64)
            last[:] = return_last
            seen.append(int(raw[-1, 0, 0]))

        def finish():
            return f"saw {len(seen)} ticks"
        """,
    )
    model = write(
        tmp_path,
        "m.yaml",
        f"""
        config: {{name: {name}}}
        signals:
          raw: {{shape: [3, 2], dtype: int32, history: 4}}
          total: {{shape: [2], dtype: int64}}
          last: {{shape: [2], dtype: float64}}
        sources:
          gen: {{driver: synthetic, out: [raw], options: {{waveform: noise, amplitude: 100, seed: 5}}}}
        modules:
          m: {{language: python, code: mod.py, in: [raw], out: [total, last]}}
        sinks:
          keep_total: {{driver: stream_out, in: [total], options: {{stream: {name}-t, keep: true}}}}
          keep_raw: {{driver: stream_out, in: [raw], options: {{stream: {name}-r, keep: true}}}}
        """,
    )
    code, report, err = rtloop_run(model, "--ticks", "200")
    try:
        assert code == 0, err
        assert proc(report, "m")["ticks"] == 200
        assert proc(report, "m")["summary"] == "saw 200 ticks"
        assert proc(report, "m")["runs"] == "python mod.py"
        raw = rtloop.Stream.open(f"{name}-r")
        total = rtloop.Stream.open(f"{name}-t")
        # the raw stream holds the 200 ticks the module saw (the sink writes only new rows)
        r = raw.reader().window(0, raw.written).reshape(-1, 3, 2)
        t = total.reader().window(0, total.written)
        assert r.shape == (200, 3, 2) and t.shape == (200, 2)
        for k in range(200):
            hist = r[max(0, k - 3) : k + 1]
            np.testing.assert_array_equal(t[k], hist.sum(axis=(0, 1)))
    finally:
        for s in (f"{name}-r", f"{name}-t"):
            if s in rtloop.Stream.list():
                rtloop.Stream.remove(s)


def test_a_module_may_return_its_outputs_and_a_wrong_shape_or_dtype_is_named(
    tmp_path: Path,
) -> None:
    good = write(tmp_path, "good.py", "import numpy as np\ndef step(y):\n    return np.ones(3, np.float32)\n")
    bad = write(tmp_path, "bad.py", "import numpy as np\ndef step(y):\n    return np.ones(4)\n")
    for code_file, ok in ((good, True), (bad, False)):
        model = write(
            tmp_path,
            "m.yaml",
            f"""
            config: {{name: {unique("ret")}}}
            signals:
              y: {{shape: [3], dtype: float32}}
            modules:
              m: {{language: python, code: {code_file.name}, out: [y]}}
            """,
        )
        code, report, err = rtloop_run(model, "--ticks", "50")
        if ok:
            assert code == 0, err
        else:
            assert code == 1
            assert "signal 'y'" in err or 'signal "y"' in err, err
            assert "(4,)" in err and "float64" in err and "float32" in err, err
            assert report["stopped_by"] == "failed"


def test_a_module_that_raises_shows_its_traceback_and_the_model_stops_cleanly(
    tmp_path: Path,
) -> None:
    name = unique("raise")
    write(
        tmp_path,
        "boom.py",
        """
        n = 0
        def step(raw):
            global n
            n += 1
            if n == 30:
                raise RuntimeError("electrode unplugged")
        """,
    )
    model = write(
        tmp_path,
        "m.yaml",
        f"""
        config: {{name: {name}}}
        signals:
          raw: {{shape: [4], dtype: float32}}
        sources:
          gen: {{driver: synthetic, out: [raw]}}
        modules:
          boom: {{language: python, code: boom.py, in: [raw]}}
        """,
    )
    code, report, err = rtloop_run(model, "--ticks", "5000")
    assert code == 1
    assert "Traceback" in err and "electrode unplugged" in err and "boom" in err, err
    assert report["stopped_by"] == "failed"
    assert proc(report, "boom")["ticks"] == 29
    assert proc(report, "gen")["error"] is None
    assert not [s for s in rtloop.Stream.list() if s.startswith(name)]


def test_a_module_file_without_step_is_reported(tmp_path: Path) -> None:
    write(tmp_path, "nostep.py", "x = 1\n")
    model = write(
        tmp_path,
        "m.yaml",
        f"""
        config: {{name: {unique("nostep")}}}
        signals:
          y: {{shape: [1], dtype: float32}}
        modules:
          m: {{language: python, code: nostep.py, out: [y]}}
        """,
    )
    code, _, err = rtloop_run(model, "--ticks", "10")
    assert code == 1
    assert "no step function" in err, err


def test_the_model_file_errors_are_listed_with_their_lines(tmp_path: Path) -> None:
    model = write(
        tmp_path,
        "m.yaml",
        """
        config: {tick_us: 1000, bogus: 1}
        signals:
          a: {shape: [2], dtype: float32}
          b: {shape: [2], dtype: float32}
        modules:
          m1: {language: python, code: nothere.py, in: [b], out: [a]}
          m2: {language: python, code: nothere.py, in: [a], out: [b]}
        """,
    )
    (tmp_path / "nothere.py").unlink(missing_ok=True)
    code, _, err = rtloop_run(model)
    assert code == 2
    assert "bogus" in err
    assert "cycle" in err
    assert "nothere.py" in err
    assert "line " in err


def test_numba_compiles_step_before_tick_0(tmp_path: Path) -> None:
    need("numba", "numba")
    write(
        tmp_path,
        "nb.py",
        """
        def step(raw, power):
            for c in range(raw.shape[1]):
                acc = 0.0
                for r in range(raw.shape[0]):
                    acc += raw[r, c] * raw[r, c]
                power[c] = acc / raw.shape[0]
        """,
    )
    name = unique("nb")
    model = write(
        tmp_path,
        "m.yaml",
        f"""
        config: {{name: {name}}}
        signals:
          raw: {{shape: [30, 8], dtype: float32}}
          power: {{shape: [8], dtype: float32}}
        sources:
          gen: {{driver: synthetic, out: [raw], options: {{amplitude: 2.0, frequency: 1000}}}}
        modules:
          p: {{language: python, code: nb.py, numba: true, in: [raw], out: [power]}}
        sinks:
          o: {{driver: stream_out, in: [power], options: {{stream: {name}-p, keep: true}}}}
        """,
    )
    code, report, err = rtloop_run(model, "--ticks", "300")
    try:
        assert code == 0, err
        assert proc(report, "p")["runs"] == "python+numba nb.py"
        s = rtloop.Stream.open(f"{name}-p")
        power = s.reader().window(s.written - 100, s.written)
        # mean power of a sine of amplitude 2 is 2.0 (30 samples = one 1 kHz period)
        np.testing.assert_allclose(power, 2.0, rtol=1e-3)
    finally:
        if f"{name}-p" in rtloop.Stream.list():
            rtloop.Stream.remove(f"{name}-p")


def test_a_numba_module_is_compiled_for_the_arrays_it_gets_before_tick_0(tmp_path: Path) -> None:
    """LiCoRICE stops a model at its first missed deadline; so does `on_miss: stop`. A numba
    module must therefore be compiled for exactly the arrays it gets (inputs are read-only
    views) before tick 0: a second signature compiled at tick 0 takes hundreds of ms. The
    module host reports any signature compiled during the run; here there must be none. The
    objects loaded before tick 0 are frozen out of the garbage collector's reach (a numba
    process's first collections otherwise took 2-4 ms inside early ticks)."""
    need("numba", "numba")
    write(
        tmp_path,
        "nb.py",
        """
        import gc

        def step(raw, power):
            for c in range(raw.shape[1]):
                acc = 0.0
                for r in range(raw.shape[0]):
                    acc += raw[r, c] * raw[r, c]
                power[c] = acc / raw.shape[0]

        def finish():
            return f"{gc.get_freeze_count()} frozen"
        """,
    )
    model = write(
        tmp_path,
        "m.yaml",
        f"""
        config: {{name: {unique("nbwarm")}, tick_us: 1000}}
        signals:
          raw: {{shape: [30, 8], dtype: float32}}
          power: {{shape: [8], dtype: float32}}
        sources:
          gen: {{driver: synthetic, out: [raw]}}
        modules:
          p: {{language: python, code: nb.py, numba: true, in: [raw], out: [power]}}
        """,
    )
    code, report, err = rtloop_run(model, "--ticks", "200")
    assert code == 0, err
    p = proc(report, "p")
    assert "numba compiled" not in p.get("summary", ""), p.get("summary")
    assert int(p["summary"].split()[0]) > 10_000, p["summary"]
    assert p["runs"] == "python+numba nb.py"


def test_a_numba_module_keeps_filter_state_from_init_between_ticks(tmp_path: Path) -> None:
    """The outside finding: a numba module could not keep state (module-level arrays are
    read-only to numba: "Cannot modify readonly array"). `init` returns the state, `step`
    gets it after its outputs every tick; the filtered output over the whole run equals
    scipy's filter of the logged input, and nothing compiled during a tick."""
    need("numba", "numba")
    signal = need("scipy.signal", "scipy")
    write(
        tmp_path,
        "lp.py",
        """
        import numpy as np

        def init(ctx, alpha: float):
            return np.zeros(ctx.inputs["raw"].shape[1], dtype=np.float64), np.array([alpha])

        def step(raw, smooth, y, alpha):
            for r in range(raw.shape[0]):
                for c in range(raw.shape[1]):
                    y[c] += alpha[0] * (raw[r, c] - y[c])
                    smooth[r, c] = y[c]
        """,
    )
    model = write(
        tmp_path,
        "m.yaml",
        f"""
        config: {{name: {unique("nbstate")}}}
        signals:
          raw: {{shape: [30, 4], dtype: float32}}
          smooth: {{shape: [30, 4], dtype: float64}}
        sources:
          gen: {{driver: synthetic, out: [raw], options: {{amplitude: 2.0, frequency: 37}}}}
        modules:
          lp: {{language: python, code: lp.py, numba: true, options: {{alpha: 0.05}}, in: [raw], out: [smooth]}}
        sinks:
          log: {{driver: logger, in: [raw, smooth], options: {{path: log.db}}}}
        """,
    )
    code, report, err = rtloop_run(model, "--ticks", "200")
    assert code == 0, err
    p = proc(report, "lp")
    assert "numba compiled" not in p.get("summary", ""), p.get("summary")
    log = rtloop.load_log(Path(report["out_dir"]) / "log.db")
    raw = log["raw"].data.reshape(-1, 4).astype(np.float64)
    smooth = log["smooth"].data.reshape(-1, 4)
    assert len(raw) == 200 * 30
    want = signal.lfilter([0.05], [1.0, -0.95], raw, axis=0)
    np.testing.assert_allclose(smooth, want, rtol=1e-9, atol=1e-12)
    assert np.abs(smooth[-300:]).max() > 0.01, "the filter ran on a signal, not on zeros"


def test_bad_module_state_is_refused_with_what_is_allowed(tmp_path: Path) -> None:
    write(tmp_path, "m.py", "def init(ctx):\n    return [1, 2]\ndef step(raw, y, s):\n    y[:] = 0\n")
    model = write(
        tmp_path,
        "m.yaml",
        f"""
        config: {{name: {unique("badstate")}}}
        signals:
          raw: {{shape: [4], dtype: float32}}
          y: {{shape: [4], dtype: float32}}
        sources:
          gen: {{driver: synthetic, out: [raw]}}
        modules:
          m: {{language: python, code: m.py, in: [raw], out: [y]}}
        """,
    )
    code, report, err = rtloop_run(model, "--ticks", "10")
    assert code != 0
    assert "init returned list as state 0: return None, a numpy array or a tuple of numpy arrays" in err, err


def _example(tmp_path: Path, sub: str, model: str, replace: dict) -> Path:
    src = EXAMPLES / sub
    for f in src.iterdir():
        if f.is_file():
            shutil.copy(f, tmp_path / f.name)
    text = (tmp_path / model).read_text()
    for a, b in replace.items():
        text = text.replace(a, b)
    (tmp_path / model).write_text(text)
    return tmp_path / model


def test_udp_echo_returns_every_packet(tmp_path: Path) -> None:
    port_in, port_out = free_port(), free_port()
    model = _example(
        tmp_path,
        "udp_echo",
        "model.yaml",
        {
            "127.0.0.1:25000": f"127.0.0.1:{port_in}",
            "127.0.0.1:25001": f"127.0.0.1:{port_out}",
            "name: udp_echo": f"name: {unique('echo')}",
        },
    )
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    rx.bind(("127.0.0.1", port_out))
    rx.settimeout(0.5)
    got: List[bytes] = []

    def receive() -> None:
        while True:
            try:
                got.append(rx.recv(2048))
            except socket.timeout:
                if done.is_set():
                    return

    done = threading.Event()
    t = threading.Thread(target=receive)
    t.start()
    runner = subprocess.Popen(
        [sys.executable, "-m", "rtloop", "--json", "run", str(model), "--quiet", "--seconds", "8"],
        cwd=model.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # wait until the model echoes (a packet sent before it runs is lost, as on a NIC): probe
    # packets until one comes back, then count only what follows
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    deadline = time.monotonic() + 60
    while not any(g.startswith(b"probe") for g in got):
        assert runner.poll() is None, runner.communicate()
        assert time.monotonic() < deadline, "the echo model never answered a probe"
        tx.sendto(b"probe", ("127.0.0.1", port_in))
        time.sleep(0.02)
    sent = []
    for i in range(500):
        payload = (i.to_bytes(4, "little") * 368)[: 16 + (i * 37) % 1457]
        tx.sendto(payload, ("127.0.0.1", port_in))
        sent.append(payload)
        if i % 50 == 0:
            time.sleep(0.002)
    tx.sendto(b"x" * 1473, ("127.0.0.1", port_in))  # larger than a row: dropped, counted
    out, err = runner.communicate(timeout=120)
    done.set()
    t.join()
    rx.close()
    tx.close()
    assert runner.returncode == 0, err
    got = [g for g in got if g != b"probe"]
    assert got == sent, f"{len(got)} of {len(sent)} echoed"
    report = json.loads(out)
    assert "1 oversized" in proc(report, "udp_rx")["summary"], proc(report, "udp_rx")
    assert "larger than" in err and "1472" in err, err


def test_spike_detector_triggers_over_udp(tmp_path: Path) -> None:
    need("scipy", "scipy")
    port = free_port()
    model = _example(
        tmp_path,
        "spike_detector",
        "model.yaml",
        {"127.0.0.1:25002": f"127.0.0.1:{port}", "name: spike_detector": f"name: {unique('spk')}"},
    )
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", port))
    rx.settimeout(0.2)
    triggers: List[bytes] = []
    done = threading.Event()

    def receive() -> None:
        # read while the model runs: a socket buffer holds only a few hundred datagrams
        while True:
            try:
                triggers.append(rx.recv(16))
            except socket.timeout:
                if done.is_set():
                    return

    t = threading.Thread(target=receive)
    t.start()
    code, report, err = rtloop_run(model, "--ticks", "2000")
    done.set()
    t.join()
    rx.close()
    assert code == 0, err
    assert len(triggers) > 10 and all(t == b"\x01" for t in triggers)
    sent = int(proc(report, "stim")["summary"].split()[1])
    assert len(triggers) == sent
    detections = int(proc(report, "detect")["summary"].split()[0])
    assert detections >= len(triggers)
    # the logger's flags: one row per tick, and the ticks with a flag are the triggers
    # the log is in the run's output directory, not beside the model file
    assert not (tmp_path / "spikes.db").exists()
    db = sqlite3.connect(Path(report["out_dir"]) / "spikes.db")
    rows = db.execute('SELECT COUNT(*) FROM "ticks"').fetchone()[0]
    assert rows == 2000
    cols = [r[1] for r in db.execute('PRAGMA table_info("sig_spikes")')]
    flagged = db.execute(
        f'SELECT COUNT(*) FROM "sig_spikes" WHERE {" + ".join(c for c in cols if c.startswith("v"))} > 0'
    ).fetchone()[0]
    assert flagged == len(triggers)


def test_numeric_load_example_runs_all_three_operations_every_tick(tmp_path: Path) -> None:
    model = _example(
        tmp_path, "numeric_load", "model.yaml", {"name: numeric_load": f"name: {unique('num')}"}
    )
    code, report, err = rtloop_run(model, "--ticks", "500")
    assert code == 0, err
    assert proc(report, "load")["ticks"] == 500
    db = sqlite3.connect(Path(report["out_dir"]) / "numeric.db")
    v = db.execute('SELECT v0, v1, v2 FROM "sig_result" ORDER BY tick DESC LIMIT 1').fetchone()
    rng = np.random.default_rng(0)
    A = rng.standard_normal((200, 200))
    B = rng.standard_normal((200, 200))
    C = rng.standard_normal((20, 20)) + 20.0 * np.eye(20)
    D = rng.standard_normal((35, 35))
    np.testing.assert_allclose(
        v, [(A @ B)[0, 0], np.linalg.inv(C)[0, 0], np.linalg.pinv(D)[0, 0]], rtol=1e-9
    )


def test_run_from_python_returns_the_report_and_writes_plots(tmp_path: Path) -> None:
    write(tmp_path, "empty.py", "def step():\n    pass\n")
    model = write(
        tmp_path,
        "m.yaml",
        f"""
        config: {{name: {unique("empty")}}}
        signals: {{}}
        modules:
          empty: {{language: python, code: empty.py}}
        """,
    )
    report = rtloop.runtime.run(model, ticks=300, out=tmp_path / "report")
    # a typed report: the Python class names exactly the fields the runtime library gives
    rtloop.reports.RunReport.check(report)
    assert report.ticks == 300 and report.processes[0].name == report["processes"][0]["name"]
    assert report["ticks"] == 300
    assert proc(report, "empty")["exec"]["count"] == 300
    assert (tmp_path / "report" / "report.json").exists()
    assert (tmp_path / "report" / "tick_start.png").stat().st_size > 1000
    assert (tmp_path / "report" / "exec_empty.png").exists()
    with pytest.raises(RuntimeError, match="exit 2"):
        rtloop.runtime.run(tmp_path / "missing.yaml")


def test_check_reads_each_python_step_signature_without_running_the_module(tmp_path: Path) -> None:
    """`rtloop run --check` parses each Python module (nothing of it runs: module-level code
    may open devices) and refuses a `step` that does not take the inputs then the outputs."""
    model_text = """
        config: {{name: {name}}}
        signals:
          raw: {{shape: [30, 8], dtype: float32}}
          power: {{shape: [8], dtype: float32}}
        sources:
          gen: {{driver: synthetic, out: [raw]}}
        modules:
          p: {{language: python, code: mod.py, in: [raw], out: [power]}}
        """
    model = write(tmp_path, "m.yaml", model_text.format(name=unique("chk")))

    def check(module: str) -> subprocess.CompletedProcess:
        write(tmp_path, "mod.py", module)
        return subprocess.run(
            [sys.executable, "-m", "rtloop", "run", "--check", str(model)],
            capture_output=True, text=True, timeout=120,
        )

    marker = tmp_path / "ran"
    ok = check(f"open({str(marker)!r}, 'w').close()\ndef step(raw, power):\n    power[:] = raw.mean(axis=0)\n")
    assert ok.returncode == 0, ok.stderr
    assert not marker.exists(), "the check ran the module's code"
    for module, words in [
        ("def step(raw):\n    pass\n", "step(raw) does not take the 2 arguments the model passes: raw, power (its inputs, then its outputs)"),
        ("def step(a, b, c):\n    pass\n", "step(a, b, c) does not take the 2 arguments"),
        ("def stop(raw, power):\n    pass\n", "has no top-level `def step(raw, power): ...`"),
        ("def step(raw, power)\n    pass\n", "syntax error"),
    ]:
        r = check(module)
        assert r.returncode == 2, (module, r.stdout, r.stderr)
        assert words in r.stderr and 'module "p"' in r.stderr, r.stderr
    # defaults and *args are fine
    assert check("def step(raw, power, scale=2.0):\n    pass\n").returncode == 0
    assert check("def step(*signals):\n    pass\n").returncode == 0


def test_load_log_reads_the_logger_sinks_database_into_numpy(tmp_path: Path) -> None:
    name = unique("log")
    model = write(
        tmp_path,
        "m.yaml",
        f"""
        config: {{name: {name}}}
        signals:
          raw: {{shape: [30, 8], dtype: float32}}
          level: {{shape: [4], dtype: int16}}
        sources:
          a: {{driver: synthetic, out: [raw], options: {{amplitude: 3.0}}}}
          b: {{driver: synthetic, out: [level], options: {{amplitude: 100.0}}}}
        sinks:
          log: {{driver: logger, in: [raw, level], options: {{path: run.db}}}}
        """,
    )
    code, report, err = rtloop_run(model, "--ticks", "120")
    assert code == 0, err
    out = Path(report["out_dir"])
    assert out == tmp_path / "out" / name
    log = rtloop.load_log(out / "run.db")
    n = len(log.ticks["tick"])
    assert n == 120 and np.all(np.diff(log.ticks["tick"]) == 1)
    raw, level = log["raw"], log["level"]
    # a large signal is stored as a BLOB per tick, a small one as one column per value
    assert raw.data.shape == (120, 30, 8) and raw.data.dtype == np.float32
    assert level.data.shape == (120, 4) and level.data.dtype == np.int16
    np.testing.assert_array_equal(raw.tick, log.ticks["tick"])
    assert np.abs(raw.data).max() <= 3.0 + 1e-6 and np.abs(raw.data).max() > 0
    # the same values as the database holds
    db = sqlite3.connect(out / "run.db")
    first = db.execute("SELECT * FROM sig_level ORDER BY rowid LIMIT 1").fetchone()
    assert list(level.data[0]) == list(first[1:])
    blob = db.execute("SELECT data FROM sig_raw ORDER BY rowid LIMIT 1").fetchone()[0]
    np.testing.assert_array_equal(raw.data[0], np.frombuffer(blob, np.float32).reshape(30, 8))
    db.close()
    assert [t for t, _ in level.per_tick()][:3] == list(log.ticks["tick"][:3])
    with pytest.raises(KeyError, match="logs no signal 'nope'; it logs: raw, level"):
        log["nope"]
    (tmp_path / "junk.db").write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(ValueError, match="is not a runtime log"):
        rtloop.load_log(tmp_path / "junk.db")
    with pytest.raises(FileNotFoundError, match="no runtime log at"):
        rtloop.load_log(tmp_path / "missing.db")


def test_load_log_reads_a_log_from_before_channels_and_names_a_damaged_signal(tmp_path: Path) -> None:
    """A log written before signals had `channels` and `units` columns still loads (none
    given); a log whose signal table is gone is a ValueError naming the signal, not
    SQLite's own error."""
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE ticks(tick INTEGER PRIMARY KEY, deadline_ns INTEGER, start_ns INTEGER,
                           monotonic_ns INTEGER, realtime_ns INTEGER);
        CREATE TABLE signals(name TEXT PRIMARY KEY, dtype TEXT, shape TEXT,
                             rows_per_tick INTEGER, variable INTEGER, table_name TEXT);
        CREATE TABLE sig_level(tick INTEGER, v0 INTEGER, v1 INTEGER);
        CREATE TABLE sig_ev(tick INTEGER, rows INTEGER, data BLOB);
        INSERT INTO signals VALUES ('level', 'uint8', '[2]', 1, 0, 'sig_level'),
                                   ('ev', 'float32', '[3, 1]', 3, 1, 'sig_ev');
        INSERT INTO ticks VALUES (0, 10, 11, 12, 13), (1, 20, 21, 22, 23);
        INSERT INTO sig_level VALUES (0, 7, 255), (1, 8, 0);
        """
    )
    db.execute("INSERT INTO sig_ev VALUES (0, 0, ?), (1, 2, ?)",
               (b"", np.array([1.5, -2.0], np.float32).tobytes()))
    db.commit()
    db.close()
    log = rtloop.load_log(path)
    assert list(log.ticks) == ["tick", "deadline_ns", "start_ns", "monotonic_ns", "realtime_ns"]
    assert list(log.ticks["realtime_ns"]) == [13, 23] and log.ticks["tick"].dtype == np.int64
    level, ev = log["level"], log["ev"]
    assert level.data.dtype == np.uint8 and level.data.tolist() == [[7, 255], [8, 0]]
    assert level.channels == () and level.units == () and list(level.rows) == [1, 1]
    assert ev.variable and list(ev.rows) == [0, 2] and ev.data.shape == (2, 1)
    assert [(t, d.ravel().tolist()) for t, d in ev.per_tick()] == [(0, []), (1, [1.5, -2.0])]
    db = sqlite3.connect(path)
    db.execute("DROP TABLE sig_ev")
    db.commit()
    db.close()
    with pytest.raises(ValueError, match='is not a runtime log .*signal "ev": its table "sig_ev" is missing'):
        rtloop.load_log(path)


def test_a_rerun_writes_a_new_log_and_the_path_opens_the_newest(tmp_path: Path) -> None:
    """Running the same model again, also after a run that failed, logs to a new file named
    with the run's start time; the logger's `path` opens the newest run's log."""
    name = unique("rerun")
    model = write(
        tmp_path,
        "m.yaml",
        f"""
        config: {{name: {name}}}
        signals:
          level: {{shape: [4], dtype: int16}}
        sources:
          b: {{driver: synthetic, out: [level], options: {{amplitude: 100.0}}}}
        sinks:
          log: {{driver: logger, in: [level], options: {{path: run.db}}}}
        """,
    )
    out = tmp_path / "out" / name
    for ticks in ["30", "50", "70"]:
        code, report, err = rtloop_run(model, "--ticks", ticks)
        assert code == 0, err
        assert rtloop.load_log(out / "run.db").ticks["tick"].size == int(ticks)
    logs = sorted(p.name for p in out.glob("run-*.db"))
    assert len(logs) == 3, logs
    assert sorted(rtloop.load_log(out / n).ticks["tick"].size for n in logs) == [30, 50, 70]
    assert (out / "run.db").is_symlink()


def test_options_reach_init_every_n_ticks_holds_outputs_and_the_log_carries_channel_names(
    tmp_path: Path,
) -> None:
    """LiCoRICE's module model: parameters from the model file reach the module's
    constructor (`init`, outside the ticks, with the signals' shapes and channel names), the
    destructor (`finish(ctx)`) reports, a module with `every: 5` runs on every fifth tick
    while its output holds between, a variable output carries the rows `step` returns, and
    `load_log` names the logged columns by the model's channel names."""
    name = unique("opts")
    write(
        tmp_path,
        "m.py",
        """
        import json
        import numpy as np

        GAIN = 0.0
        calls = 0
        seen = {}

        def init(ctx, gain: float, label: str = "none", taps: list = [0]):
            global GAIN
            GAIN = gain
            seen.update(label=label, taps=taps, every=ctx.every, tick_s=ctx.tick_s,
                        raw_shape=list(ctx.inputs["raw"].array_shape),
                        raw_channels=list(ctx.inputs["raw"].channels),
                        out_dir=str(ctx.out_dir), calls_at_init=calls)

        def step(raw, level, marks):
            global calls
            calls += 1
            level[:] = calls * GAIN
            return level, np.full((calls % 3, 2), calls, dtype=np.int32)

        def finish(ctx):
            (ctx.out_dir / "seen.json").write_text(json.dumps(seen))
            return f"{calls} calls of {ctx.name}"
        """,
    )
    model = write(
        tmp_path,
        "m.yaml",
        f"""
        config: {{name: {name}}}
        signals:
          raw: {{shape: [10, 3], dtype: float32, channels: [Fz, Cz, Pz], history: 5, units: uV}}
          level: {{shape: [3], dtype: float32, channels: [Fz, Cz, Pz], units: [uV, '', mV]}}
          marks: {{shape: [4, 2], dtype: int32, variable: true}}
        sources:
          gen: {{driver: synthetic, out: [raw]}}
        modules:
          m:
            language: python
            code: m.py
            every: 5
            options: {{gain: 2, label: hi, taps: [1, 2, 3]}}
            in: [raw]
            out: [level, marks]
        sinks:
          log: {{driver: logger, in: [level, marks, raw], options: {{path: log.db}}}}
        """,
    )
    check = subprocess.run([sys.executable, "-m", "rtloop", "run", "--check", str(model)],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
    code, report, err = rtloop_run(model, "--ticks", "40", "--keep")
    assert code == 0, err
    # the model's channel names and units reach the signals' streams (an outside finding:
    # declared names appeared as ch0.., with no unit), hence the viewer and recordings
    kept = [rtloop.Stream.open(f"{name}.{sig}") for sig in ("raw", "level", "marks")]
    try:
        assert [(s.ch_names, s.ch_units) for s in kept] == [
            (["Fz", "Cz", "Pz"], ["uV", "uV", "uV"]),
            (["Fz", "Cz", "Pz"], ["uV", "", "mV"]),
            (["ch0", "ch1"], ["", ""]),  # none given: the stream names them
        ]
    finally:
        # --keep kept every stream of the run: the signals' and the tick timing's
        for left in rtloop.Stream.list():
            if left.startswith(f"{name}."):
                rtloop.Stream.remove(left)
    out = Path(report["out_dir"])
    m = proc(report, "m")
    assert m["summary"] == f"8 calls of m" and m["ticks"] == 40
    seen = json.loads((out / "seen.json").read_text())
    assert seen == {"label": "hi", "taps": [1, 2, 3], "every": 5, "tick_s": 0.001,
                    "raw_shape": [5, 10, 3], "raw_channels": ["Fz", "Cz", "Pz"],
                    "out_dir": str(out), "calls_at_init": 0}
    log = rtloop.load_log(out / "log.db")
    level = log["level"]
    # call k (1-based) runs at tick 5(k-1) and holds through the next four ticks
    expected = 2.0 * (np.arange(40) // 5 + 1)
    np.testing.assert_array_equal(level.data[:, 0], expected)
    assert level.channels == ("Fz", "Cz", "Pz") and log["raw"].channels == ("Fz", "Cz", "Pz")
    assert level.units == ("uV", "", "mV") and log["raw"].units == ("uV",) * 3
    assert log["marks"].units == ()
    frame = log["raw"].to_pandas()
    assert list(frame.columns) == ["tick", "Fz", "Cz", "Pz"] and len(frame) == 40 * 10
    np.testing.assert_array_equal(frame[["Fz", "Cz", "Pz"]].to_numpy(), log["raw"].data.reshape(-1, 3))
    assert list(level.to_pandas().columns) == ["tick", "Fz", "Cz", "Pz"]
    # marks: call k returns k % 3 rows of value k on its tick, none between
    marks = log["marks"]
    want_rows = [(t // 5 + 1) % 3 if t % 5 == 0 else 0 for t in range(40)]
    assert list(marks.rows) == want_rows
    for t, rows in marks.per_tick():
        assert (rows == t // 5 + 1).all()
    assert list(marks.to_pandas().columns) == ["tick", "v0", "v1"]


def test_bad_module_options_are_refused_by_check_and_before_tick_0(tmp_path: Path) -> None:
    """Each bad option gets a message naming the option and what `init` takes, from
    `--check` (without running the module) where the file alone shows it, and from the run
    before tick 0 in every case."""
    write(tmp_path, "m.py", "def init(ctx, scale: float, label: str = 'x'):\n    pass\n"
                           "def step(raw, y):\n    y[:] = 0\n")
    write(tmp_path, "noinit.py", "def step(raw, y):\n    y[:] = 0\n")

    def model(options: str, code: str = "m.py") -> Path:
        return write(tmp_path, "m.yaml", f"""
            config: {{name: {unique('badopt')}}}
            signals:
              raw: {{shape: [4], dtype: float32}}
              y: {{shape: [4], dtype: float32}}
            sources:
              gen: {{driver: synthetic, out: [raw]}}
            modules:
              m: {{language: python, code: {code}, options: {options}, in: [raw], out: [y]}}
            """)

    cases = [
        ("{scale: 2, bogus: 1}", "m.py",
         "options bogus are not taken by init(ctx, scale, label); it takes: scale, label",
         "unknown option 'bogus'; init(ctx, scale: float, label: str = 'x') takes: scale, label"),
        ("{label: a}", "m.py",
         "init(ctx, scale, label) needs the options scale",
         "option 'scale' is required by init(ctx, scale: float, label: str = 'x')"),
        ("{scale: fast}", "m.py", None,
         "option 'scale' is 'fast' (str); init(ctx, scale: float, label: str = 'x') wants float"),
        ("{scale: 2}", "noinit.py",
         "has no top-level `def init(ctx, scale): ...` to receive the module's options: scale",
         "has no init(ctx, ...) to receive scale"),
    ]
    for options, code, at_check, at_run in cases:
        path = model(options, code)
        c = subprocess.run([sys.executable, "-m", "rtloop", "run", "--check", str(path)],
                           capture_output=True, text=True, timeout=120)
        if at_check is None:
            assert c.returncode == 0, (options, c.stderr)  # a type is seen only by running init
        else:
            assert c.returncode == 2 and at_check in c.stderr, (options, c.stderr)
        code_, report, err = rtloop_run(path, "--ticks", "20")
        assert code_ != 0 and at_run in err, (options, err)
        assert proc(report, "m")["ticks"] == 0, report
    # an int is a float, a bool is not an int
    ok = model("{scale: 3}")
    assert rtloop_run(ok, "--ticks", "5")[0] == 0


def test_every_key_of_the_model_reference_is_in_its_full_example(tmp_path: Path) -> None:
    """docs/runtime-model.md documents each key in a table; its full example (which
    test_docs runs for 200 ticks, modules and all) must use every one of them."""
    doc = (Path(__file__).resolve().parent.parent / "docs" / "runtime-model.md").read_text()
    keys = set()
    for section in ("config:", "signals:", "sources:", "modules:", "sinks:", "in:"):
        start = doc.index(f"## `{section}`")
        # the section's key table: before the next section or the section's first subsection
        end = doc.index("\n## ", start + 3)
        sub = doc.find("\n### ", start + 3)
        table = doc[start:sub if 0 <= sub < end else end]
        keys |= {line.split("|")[1].strip().strip("`") for line in table.splitlines()
                 if line.startswith("| `")}
    start = doc.index("<!-- doc-test: file model.yaml -->")
    example = doc[start:doc.index("```\n", doc.index("```yaml", start) + 7)]
    missing = sorted(k for k in keys if f"{k}:" not in example)
    assert len(keys) >= 25 and not missing, missing


def test_runtime_run_calls_the_library_in_process_and_returns_the_cli_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rtloop.runtime.run` runs the model through the same library call as `rtloop run`
    (no `rtloop` command in between) and returns the report `--json` prints, written to the
    output directory; a refused model and a failed run are errors with rtloop's message, or
    reports saying so with check=False."""
    monkeypatch.chdir(tmp_path)
    name = unique("pyrun")
    write(tmp_path, "m.py", "def step(raw, y):\n    y[:] = raw * 2\n")
    # 5 ms ticks: what is tested is the report, not the timing (a loaded machine refuses 1 ms)
    model = write(tmp_path, "m.yaml", f"""
        config: {{name: {name}, tick_us: 5000}}
        signals:
          raw: {{shape: [4], dtype: float32}}
          y: {{shape: [4], dtype: float32}}
        sources:
          gen: {{driver: synthetic, out: [raw]}}
        modules:
          m: {{language: python, code: m.py, in: [raw], out: [y]}}
        """)
    report = rtloop.runtime.run(model, ticks=100)
    assert report["model"] == name and report["ticks"] == 100 and report.get("problem") is None
    assert [p["name"] for p in report["processes"]] == ["gen", "m"]
    assert all(p["ticks"] == 100 for p in report["processes"])
    out = Path(report["out_dir"])
    assert out == tmp_path / "out" / name
    assert json.loads((out / "report.json").read_text())["ticks"] == 100
    # the command line's --json report of the same model has the same fields
    code, cli_report, err = rtloop_run(model, "--ticks", "100", "--out", str(tmp_path / "cli"))
    assert code == 0, err
    assert set(cli_report) == set(report)
    # a refused model: the model's problems, before anything starts
    bad = write(tmp_path, "bad.yaml", "signals:\n  raw: {shap: 4, dtype: float32}\n")
    with pytest.raises(RuntimeError, match="unknown key 'shap'"):
        rtloop.runtime.run(bad, ticks=10)
    refused = rtloop.runtime.run(bad, ticks=10, check=False)
    assert refused["exit"] == 2 and "unknown key 'shap'" in refused["problem"]
    # a failed run: the module raises at its first tick
    write(tmp_path, "m.py", "def step(raw, y):\n    raise ValueError('boom')\n")
    with pytest.raises(RuntimeError, match="boom"):
        rtloop.runtime.run(model, ticks=50, out=tmp_path / "failed")
    failed = rtloop.runtime.run(model, ticks=50, out=tmp_path / "failed2", check=False)
    assert "boom" in failed["problem"]


def test_a_run_publishes_its_tick_timing_as_a_stream(tmp_path: Path) -> None:
    """What the timer measures goes live into `<model>.tick-timing`: per tick, how late it
    started and each process's execution time of the tick before (what `rtloop view` shows)."""
    name = unique("timing")
    model = write(
        tmp_path,
        "m.yaml",
        f"""
        config: {{name: {name}}}
        signals:
          x: {{shape: [2], dtype: float32}}
        sources:
          gen: {{driver: synthetic, out: [x]}}
        sinks:
          keep: {{driver: stream_out, in: [x], options: {{stream: {name}-x}}}}
        """,
    )
    code, report, err = rtloop_run(model, "--ticks", "300", "--keep")
    timing = f"{name}.tick-timing"
    try:
        assert code == 0, err
        s = rtloop.Stream.open(timing)
        names = [p["name"] for p in report["processes"]]
        assert s.ch_names == ["tick_start_late"] + [f"{n}_exec" for n in names]
        assert s.ch_units == ["us"] * s.n_channels and s.dtype == np.float32
        assert s.written == 300, "one row per tick"
        rows = s.reader().window(0, s.written)
        assert np.isfinite(rows).all() and (rows >= 0).all()
        # every process ran: its execution time shows from the second tick on
        assert (rows[2:, 1:] > 0).all(axis=0).all(), rows[:5]
    finally:
        for n in rtloop.Stream.list():
            if n.startswith(name):
                rtloop.Stream.remove(n)
    # without --keep the run removes it with its signals' streams
    code, _, err = rtloop_run(model, "--ticks", "20")
    assert code == 0, err
    assert not [n for n in rtloop.Stream.list() if n.startswith(name)]


def test_a_signals_occupancy_is_its_readers_real_lag(tmp_path: Path) -> None:
    """A module reads its inputs by window; its reader's cursor follows what it consumed, so
    PercentUsed (what `rtloop stream list` and `rtloop view` show) is its lag, not 100 %."""
    name = unique("occ")
    write(tmp_path, "m.py", "def step(x, y):\n    y[:] = x\n")
    model = write(
        tmp_path,
        "m.yaml",
        f"""
        config: {{name: {name}}}
        signals:
          x: {{shape: [4], dtype: float32}}
          y: {{shape: [4], dtype: float32}}
        sources:
          gen: {{driver: synthetic, out: [x]}}
        modules:
          m: {{language: python, code: m.py, in: [x], out: [y]}}
        """,
    )
    p = subprocess.Popen([sys.executable, "-m", "rtloop", "run", str(model), "--seconds", "20", "--quiet"],
                         cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if f"{name}.x" in rtloop.Stream.list():
                st = rtloop.Stream.open(f"{name}.x").stats()
                if st["written"] > 500 and st["readers"]:
                    break
            time.sleep(0.1)
        else:
            raise AssertionError("the model did not start")
        st = rtloop.Stream.open(f"{name}.x").stats()
        assert st["percent_used"] < 50, st
        assert all(r["lag"] < st["capacity"] // 2 for r in st["readers"]), st
    finally:
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=60)


def _rtloop() -> List[str]:
    """The rtloop command: `RTLOOP_BIN` if set (a built binary), else this package's."""
    exe = os.environ.get("RTLOOP_BIN")
    return [exe] if exe else [sys.executable, "-m", "rtloop"]


def _children_of(pid: int) -> List[int]:
    """The processes whose parent is `pid` (from /proc)."""
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
            kids.append(int(d))
    return kids


def _running(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie (an orphan's zombie waits for init)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_a_killed_supervisor_takes_its_processes_with_it(tmp_path: Path) -> None:
    """`rtloop run` killed with SIGKILL cannot stop its processes through the board; they
    wait on ticks nobody starts. Each dies with it (the parent-death signal), the source
    (an `rtloop child` process) and the Python module alike."""
    name = unique("orphan")
    write(tmp_path, "m.py", "def step(x, y):\n    y[:] = x\n")
    model = write(
        tmp_path,
        "m.yaml",
        f"""
        config: {{name: {name}, tick_us: 5000}}
        signals:
          x: {{shape: [4], dtype: float32}}
          y: {{shape: [4], dtype: float32}}
        sources:
          gen: {{driver: synthetic, out: [x]}}
        modules:
          m: {{language: python, code: m.py, in: [x], out: [y]}}
        """,
    )
    sup = subprocess.Popen(
        [*_rtloop(), "run", str(model), "--seconds", "600", "--quiet"],
        cwd=tmp_path,
        env=dict(os.environ, RTLOOP_PYTHON=sys.executable),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    kids: List[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if f"{name}.y" in rtloop.Stream.list() and rtloop.Stream.open(f"{name}.y").written > 50:
                break
            assert sup.poll() is None, "the model ended before it was killed"
            time.sleep(0.1)
        else:
            raise AssertionError("the model did not start")
        kids = _children_of(sup.pid)
        assert len(kids) == 2, kids  # gen and m
        sup.kill()
        sup.wait()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_running(k) for k in kids):
            time.sleep(0.1)
        assert not [k for k in kids if _running(k)], "processes outlived their supervisor"
    finally:
        sup.kill()
        sup.wait()
        for k in kids:
            if _running(k):
                os.kill(k, signal.SIGKILL)
        for n in rtloop.Stream.list():
            if n.startswith(name):
                rtloop.Stream.remove(n)
        shm = Path(os.environ.get("RTLOOP_SHM_DIR", "/dev/shm"))
        (shm / f".rtloop-board-{name}").unlink(missing_ok=True)
        shutil.rmtree(Path(tempfile.gettempdir()) / f"rtloop-run-{name}-{sup.pid}", ignore_errors=True)


@pytest.mark.parametrize("target", ["gen", "m", "supervisor"])
def test_sigterm_of_a_process_or_of_the_supervisor_stops_the_run(tmp_path: Path, target: str) -> None:
    """`kill PID` (SIGTERM) of a process of a running model (the source is an `rtloop child`
    process, `m` a Python module) ends it, and the run stops and names it; SIGTERM of `rtloop
    run` itself stops the run as Ctrl-C does. Either way no process is left."""
    name = unique("term")
    write(tmp_path, "m.py", "def step(x, y):\n    y[:] = x\n")
    model = write(
        tmp_path,
        "m.yaml",
        f"""
        config: {{name: {name}, tick_us: 5000}}
        signals:
          x: {{shape: [4], dtype: float32}}
          y: {{shape: [4], dtype: float32}}
        sources:
          gen: {{driver: synthetic, out: [x]}}
        modules:
          m: {{language: python, code: m.py, in: [x], out: [y]}}
        """,
    )
    sup = subprocess.Popen(
        [*_rtloop(), "--json", "run", str(model), "--seconds", "600", "--quiet"],
        cwd=tmp_path,
        env=dict(os.environ, RTLOOP_PYTHON=sys.executable),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    kids: List[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if f"{name}.y" in rtloop.Stream.list() and rtloop.Stream.open(f"{name}.y").written > 50:
                break
            assert sup.poll() is None, f"the model ended before it was signalled: {sup.communicate()}"
            time.sleep(0.1)
        else:
            raise AssertionError("the model did not start")
        kids = _children_of(sup.pid)
        assert len(kids) == 2, kids  # gen and m
        by_name = {}
        for k in kids:
            cmdline = Path(f"/proc/{k}/cmdline").read_bytes()
            by_name["m" if b"rtloop.runtime" in cmdline else "gen"] = k
        assert sorted(by_name) == ["gen", "m"], by_name
        os.kill(sup.pid if target == "supervisor" else by_name[target], signal.SIGTERM)
        # generous: a loaded machine may take long to stop and write the report
        out, err = sup.communicate(timeout=120)
        report = json.loads(out)
        if target == "supervisor":
            assert report["stopped_by"] == "interrupt", (report, err)
        else:
            assert sup.returncode == 1, err
            assert report["stopped_by"] == "failed", (report, err)
            assert f'"{target}"' in report["problem"], report["problem"]
            assert "was killed by signal 15" in report["problem"], report["problem"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_running(k) for k in kids):
            time.sleep(0.1)
        assert not [k for k in kids if _running(k)], "processes outlived the run"
    finally:
        if sup.poll() is None:
            sup.kill()
            sup.communicate()
        for k in kids:
            if _running(k):
                os.kill(k, signal.SIGKILL)
        for n in rtloop.Stream.list():
            if n.startswith(name):
                rtloop.Stream.remove(n)
        shm = Path(os.environ.get("RTLOOP_SHM_DIR", "/dev/shm"))
        (shm / f".rtloop-board-{name}").unlink(missing_ok=True)
        shutil.rmtree(Path(tempfile.gettempdir()) / f"rtloop-run-{name}-{sup.pid}", ignore_errors=True)


def test_a_module_whose_init_never_returns_is_ended_by_seconds_and_named(tmp_path: Path) -> None:
    """Starting (import, init) is bounded by --seconds too: the module still in its init is
    killed and the report names it, instead of the run waiting 120 s for it."""
    name = unique("stuck")
    write(
        tmp_path,
        "m.py",
        """
        import time

        def init(ctx):
            while True:
                time.sleep(1)

        def step(x):
            pass
        """,
    )
    # the module alone: nothing else that a loaded machine could keep from starting in 2 s
    model = write(
        tmp_path,
        "m.yaml",
        f"""
        config: {{name: {name}, tick_us: 5000}}
        signals:
          x: {{shape: [4], dtype: float32}}
        modules:
          stuck: {{language: python, code: m.py, out: [x]}}
        """,
    )
    p = subprocess.run(
        [*_rtloop(), "--json", "run", str(model), "--quiet", "--seconds", "2"],
        cwd=tmp_path,
        env=dict(os.environ, RTLOOP_PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=240,
    )
    code, report, err = p.returncode, json.loads(p.stdout or "{}"), p.stderr
    assert code == 1, err
    assert report["stopped_by"] == "failed"
    assert "stuck" in report["problem"] and "--seconds 2" in report["problem"], report["problem"]
    assert "did not finish starting" in proc(report, "stuck")["error"], proc(report, "stuck")
    assert not [s for s in rtloop.Stream.list() if s.startswith(name)]
