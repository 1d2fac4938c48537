"""The wheel users install: built by the release command (scripts/wheel.sh; the set-up
script installs the same wheel into the dev venv), installed with pip into a fresh virtual
environment with no cargo on PATH, and used from a directory outside the source tree:
``import rtloop``, ``rtloop --help``, ``rtloop demo``, ``rtloop run`` of an example model,
``rtloop serve`` and ``rtloop view``. Its size is held to what a user expects."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest

# where streams live (tests/conftest.py gives each pytest-xdist worker its own directory)
SHM = Path(os.environ.get("RTLOOP_SHM_DIR", "/dev/shm"))

ROOT = Path(__file__).resolve().parent.parent
MB = 1_000_000
# the goals of the release (issue 39): what `pip install` downloads, and what `import rtloop`
# loads (measured: 8.1 MB and 6.8 MB, with the 10.9 MB `rtloop` executable in the wheel, which
# Python does not load)
WHEEL_MAX = 10 * MB
EXTENSION_MAX = 8 * MB

pytestmark = [pytest.mark.timeout(900)]


def _wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """$RTLOOP_WHEEL (a release wheel to check), else the one scripts/python-dev.sh built
    (target/wheels), else one built now."""
    if os.environ.get("RTLOOP_WHEEL"):
        return Path(os.environ["RTLOOP_WHEEL"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    found = sorted((target / "wheels").glob("rtloop-*.whl"))
    if found:
        return found[-1]
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(["bash", str(ROOT / "scripts/wheel.sh"), "--host", "--out", str(out)], check=True, timeout=3600)
    return next(out.glob("rtloop-*.whl"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _wheel(tmp_path_factory)


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """A fresh venv with the wheel (and numpy from the registry) installed; the environment
    to run in it: PATH without cargo, nothing pointing into the source tree."""
    base = tmp_path_factory.mktemp("fresh")
    venv = base / "venv"
    # the interpreter this venv was made from, not the dev venv's packages
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    path = os.pathsep.join([str(venv / "bin"), "/usr/local/bin", "/usr/bin", "/bin"])
    env = {
        "PATH": path,
        "HOME": os.environ.get("HOME", str(base)),
        "LANG": "C.UTF-8",
        "RTLOOP_PROGRESS_SECONDS": "0",
    }
    assert shutil.which("cargo", path=path) is None, "cargo is on the fresh environment's PATH"
    pip = subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "install", "--disable-pip-version-check", "-q", str(wheel)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    work = base / "work"
    work.mkdir()
    env["WORK"] = str(work)
    env["VENV"] = str(venv)
    return env


def _run(env: Dict[str, str], args: List[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    run_env = {k: v for k, v in env.items() if k not in ("WORK", "VENV")}
    return subprocess.run(args, cwd=env["WORK"], env=run_env, capture_output=True, text=True, timeout=timeout)


def test_the_wheel_is_small_abi3_and_holds_the_rtloop_executable(wheel: Path) -> None:
    # one wheel for every CPython from 3.9 on
    assert "-cp39-abi3-" in wheel.name, wheel.name
    size = wheel.stat().st_size
    print(f"\nwheel {wheel.name}: {size / MB:.2f} MB")
    assert size <= WHEEL_MAX, f"{wheel.name} is {size / MB:.1f} MB (goal {WHEEL_MAX / MB:.0f} MB)"
    with zipfile.ZipFile(wheel) as z:
        files = {i.filename: i for i in z.infolist()}
    ext = [i for n, i in files.items() if n.startswith("rtloop/_rtloop") and n.endswith(".so")]
    assert len(ext) == 1, sorted(files)
    print(f"extension {ext[0].filename}: {ext[0].file_size / MB:.2f} MB")
    assert ext[0].file_size <= EXTENSION_MAX, (
        f"the extension is {ext[0].file_size / MB:.1f} MB (goal {EXTENSION_MAX / MB:.0f} MB)"
    )
    exe = files.get("rtloop/_bin/rtloop")
    assert exe is not None, sorted(files)
    print(f"executable rtloop/_bin/rtloop: {exe.file_size / MB:.2f} MB")
    # the Unix mode in the zip entry: pip installs it executable
    assert (exe.external_attr >> 16) & 0o111, oct(exe.external_attr >> 16)


def test_the_installed_package_works_without_the_source_tree_or_cargo(installed: Dict[str, str]) -> None:
    env = installed
    venv = Path(env["VENV"])
    py = str(venv / "bin/python")
    out = _run(env, [py, "-c", "import rtloop, numpy; print(rtloop.__file__); print(rtloop.__version__)"])
    assert out.returncode == 0, out.stderr
    where = Path(out.stdout.splitlines()[0])
    assert venv in where.parents and ROOT not in where.parents, where

    out = _run(env, ["rtloop", "--help"])
    assert out.returncode == 0, out.stderr
    assert "demo" in out.stdout and "serve" in out.stdout and "run" in out.stdout
    out = _run(env, [py, "-m", "rtloop", "--version"])
    assert out.returncode == 0 and out.stdout.startswith("rtloop "), out.stderr

    # the demo: a writer and a reader process (the executable starts itself for the reader)
    out = _run(env, ["rtloop", "--json", "demo", "--seconds", "1", "--channels", "16", "--rate", "1000"])
    assert out.returncode == 0, out.stderr
    assert '"samples' in out.stdout or "samples" in out.stdout, out.stdout


def test_rtloop_run_of_an_example_from_the_installed_package(installed: Dict[str, str]) -> None:
    # numeric_load: a Python module (numpy, run by the fresh venv's interpreter) and the
    # logger sink (SQLite, in the executable)
    model = Path(installed["WORK"]) / "numeric_load"
    shutil.copytree(ROOT / "examples/models/numeric_load", model)
    out_dir = Path(installed["WORK"]) / "run-out"
    out = _run(installed, ["rtloop", "run", str(model / "model.yaml"), "--ticks", "200", "--quiet",
                           "--out", str(out_dir)], timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    # every tick's result, computed by numpy in the module process, is in the logger's database
    with sqlite3.connect(out_dir / "numeric.db") as db:
        assert db.execute("select count(*) from ticks").fetchone() == (200,)
        assert db.execute("select count(*) from sig_result").fetchone() == (200,)
    assert (out_dir / "report.json").is_file()


def test_rtloop_serve_from_the_installed_package(installed: Dict[str, str]) -> None:
    stream = f"wheel-serve-{os.getpid()}"
    run_env = {k: v for k, v in installed.items() if k not in ("WORK", "VENV")}
    p = subprocess.Popen(
        ["rtloop", "serve", "--bind", "127.0.0.1:0", "--stream", stream],
        cwd=installed["WORK"], env=run_env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    with p:
        try:
            assert p.stdout is not None
            line = p.stdout.readline()
            assert line.startswith("listening tcp=127.0.0.1:"), line
            # SIGTERM stops it cleanly, from the moment it says it listens
            p.send_signal(signal.SIGTERM)
            assert p.wait(timeout=30) == 0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            (SHM / f"rtloop-{stream}").unlink(missing_ok=True)


def test_rtloop_view_from_the_installed_package(installed: Dict[str, str]) -> None:
    # the viewer's web server is in the executable (not in the native module): its page loads
    run_env = {k: v for k, v in installed.items() if k not in ("WORK", "VENV")}
    p = subprocess.Popen(
        ["rtloop", "view", "--port", "0"],
        cwd=installed["WORK"], env=run_env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    with p:
        try:
            assert p.stdout is not None
            line = p.stdout.readline()
            assert line.startswith("rtloop view: open http://127.0.0.1:"), line
            url = line.split("open ", 1)[1].strip()
            # straight to the server, whatever proxy the environment names
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with opener.open(url, timeout=30) as page:
                assert page.status == 200
                assert b"<html" in page.read().lower()
            p.send_signal(signal.SIGTERM)
            assert p.wait(timeout=30) == 0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_the_lsl_extra_brings_a_working_bridge(installed: Dict[str, str], wheel: Path) -> None:
    # `pip install rtloop[lsl]` adds pylsl (which bundles liblsl); the executable then finds
    # liblsl in the fresh venv's pylsl and publishes a stream as an LSL outlet there
    venv = Path(installed["VENV"])
    py = str(venv / "bin/python")
    pip = _run(installed, [py, "-m", "pip", "install", "--disable-pip-version-check", "-q", f"{wheel}[lsl]"],
               timeout=600)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    name = f"wheel-lsl-{os.getpid()}"
    script = f"""
import subprocess, sys, time
import numpy as np, pylsl, rtloop
s = rtloop.Stream.create({name!r}, n_channels=2, dtype="float32", sfreq=100.0, capacity=1000)
w = s.writer()
p = subprocess.Popen(["rtloop", "bridge", "lsl-out", {name!r}, "--seconds", "60"])
try:
    found = pylsl.resolve_byprop("name", {name!r}, timeout=30)
    assert found, "no outlet"
    inlet = pylsl.StreamInlet(found[0])
    inlet.open_stream(timeout=10)
    got = []
    t = time.monotonic()
    while len(got) < 20 and time.monotonic() - t < 30:
        w.push_chunk(np.full((5, 2), 7.0, np.float32))
        chunk, _ = inlet.pull_chunk(timeout=0.2)
        got.extend(chunk)
    assert len(got) >= 20 and all(v == [7.0, 7.0] for v in got[:20]), got[:3]
    print("lsl ok", len(got))
finally:
    p.terminate()
    p.wait(30)
    w.close()  # an ended stream nobody reads goes with its writer
"""
    out = _run(installed, [py, "-c", script], timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "lsl ok" in out.stdout


def test_the_brainflow_extra_brings_a_working_bridge(installed: Dict[str, str], wheel: Path) -> None:
    # `pip install rtloop[brainflow]` adds brainflow (which bundles libBoardController); the
    # executable loads it from the fresh venv and streams BrainFlow's synthetic board
    venv = Path(installed["VENV"])
    py = str(venv / "bin/python")
    pip = _run(installed, [py, "-m", "pip", "install", "--disable-pip-version-check", "-q", f"{wheel}[brainflow]"],
               timeout=900)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    prefix = f"wheel-bf-{os.getpid()}"
    out = _run(installed, ["rtloop", "--json", "bridge", "brainflow-in", "--board", "synthetic", "--name", prefix,
                           "--seconds", "2"], timeout=120)
    try:
        assert out.returncode == 0, out.stdout + out.stderr
        import json

        report = json.loads(out.stdout)
        assert report["samples"] > 0, report
    finally:
        for p in SHM.glob(f"rtloop-{prefix}*"):
            p.unlink(missing_ok=True)
