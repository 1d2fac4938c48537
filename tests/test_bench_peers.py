"""`rtloop bench peers` with every peer: LSL and ZeroMQ are the C libraries the pylsl and pyzmq
wheels ship (scripts/python-dev.sh installs both); iceoryx2 (from crates.io) is in the full
build only, not in the executable the Python package ships. Each writer
and reader is its own process; every sample must arrive in order and intact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pylsl  # noqa: F401  (the peers must be installed: a missing one fails, never skips)
import pytest
import zmq

pytestmark = pytest.mark.timeout(300)


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rtloop", "--json", "bench", "peers", *args],
        capture_output=True,
        text=True,
        timeout=280,
    )


def test_every_peer_is_measured_beside_the_stream(tmp_path: Path) -> None:
    out = bench("--chunks", "16", "--readers", "1,2", "--rounds", "1", "--quick", "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    lib = {p["transport"]: p["library"] for p in rep["transports"]}
    assert set(lib) == {"stream", "lsl", "zmq-ipc", "zmq-tcp", "unix", "iceoryx2"}
    # the package's executable is the release build, which leaves the iceoryx2 peer out
    # (rtloop-cli's `iceoryx2-peer` feature) and says so; the full build measures it in
    # crates/rtloop-cli/tests/cli_bench_peers.rs
    ice = next(p for p in rep["transports"] if p["transport"] == "iceoryx2")
    assert lib.pop("iceoryx2") is None and "built without the iceoryx2 feature" in ice["not_measured"], ice
    assert all(lib.values()), rep["transports"]
    assert "pylsl" in lib["lsl"] and lib["lsl"].startswith("liblsl")
    zmq_dir = os.path.dirname(os.path.dirname(zmq.__file__))
    assert lib["zmq-tcp"].startswith(f"libzmq {zmq.zmq_version()}") and zmq_dir in lib["zmq-tcp"]

    rows = rep["rows"]
    assert len(rows) == 5 * 2
    for r in rows:
        assert (r["lost"], r["errors"], r["unfinished"]) == (0, 0, 0), r
        assert r["mb_per_s"] > 0 and r["latency"]["count"] > 0, r
    # throughput as a ratio to LSL's under the same conditions
    for r in rows:
        assert r["x_lsl"] == pytest.approx(
            r["samples_per_s"]
            / next(
                x["samples_per_s"]
                for x in rows
                if x["transport"] == "lsl" and (x["chunk"], x["readers"], x["wait"]) == (r["chunk"], r["readers"], r["wait"])
            )
        )
    v = rep["verdict"]
    assert v["min_throughput_x_lsl"] == pytest.approx(min(r["x_lsl"] for r in rows if r["transport"] == "stream"))
    assert v["throughput_target_10x_lsl_met"] == (v["min_throughput_x_lsl"] >= 10)
    assert len(v["latency_p99"]) == 2
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert len(pngs) == 4 and any(p.startswith("throughput-2-readers") for p in pngs), pngs
    for f in ("results.json", "table.md", *pngs):
        assert (tmp_path / f).stat().st_size > 0, f
    table = (tmp_path / "table.md").read_text()
    assert "| 16 | 2 | block | lsl |" in table


def test_the_human_table_names_the_verdicts() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rtloop", "bench", "peers", "--transports", "stream,lsl", "--chunks", "16",
         "--readers", "1", "--rounds", "1", "--quick"],
        capture_output=True, text=True, timeout=280,
    )
    assert out.returncode == 0, out.stderr
    assert "x LSL" in out.stdout
    assert "throughput: the stream is at least" in out.stdout
    assert "latency p99, chunk 16, 1 readers (spin): stream" in out.stdout
    assert "peers: lsl" in out.stderr  # what each transport is, before the run
