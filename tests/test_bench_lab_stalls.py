"""bench/lab_stalls.py: load tests with the emulated device process stopped now and then, beside
quiet ones. Its targets are judged in the benchmark, not here; this checks that the stops
happen, that the device makes up each one at twice its rate instead of in one burst, and that
the report and the plot are written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

BENCH = Path(__file__).resolve().parent.parent / "bench" / "lab_stalls.py"
# 60 kHz: a frame every 16,664 ns, so a 5 ms stop misses 300 frames. The device makes them up
# at twice its rate from 50 µs back: 7 in one step (steps slower than 25 µs each may widen
# that to twice their length), where it made all 300 at once before; ask for a tenth
MISSED_IN_A_STOP = 5_000_000 // 16_664


def test_the_device_is_stopped_and_makes_up_without_a_burst(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--json", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    quiet, stopped = r["runs"]
    assert (quiet["kind"], stopped["kind"]) == ("quiet", "stopped")
    assert quiet["stops"] == 0
    assert stopped["stops"] >= 3, stopped
    # each stop was seen by the device: it made a frame at least that late
    assert stopped["device_lateness_max_us"] >= 4_000, stopped
    for run in (quiet, stopped):
        assert run["loopbacks"] > 1000, run
        assert run["burst_max_frames"] <= MISSED_IN_A_STOP // 10, run
    measures = [row["measure"] for row in r["rows"]]
    assert "p99 stopped / quiet (worst of each)" in measures
    assert all(row["met"] in (True, False, None) for row in r["rows"])
    assert json.loads((tmp_path / "results.json").read_text())["runs"] == r["runs"]
    assert (tmp_path / "lab-stalls.png").stat().st_size > 1000


def test_bad_options_are_refused_with_what_is_allowed() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--pairs", "0"], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 2
    assert "--pairs must be >= 1" in out.stderr
