"""bench/lab_stalls.py: load tests with the emulated device process stopped now and then, beside
quiet ones. Its targets (the tails, how few frames one step makes on a quiet machine) are
judged in the benchmark, not here: this checks what rtloop guarantees on a busy machine too:
the stops happen and the device sees them, it makes up each one at no more than twice its rate
over its own catch-up window (set by the steps it achieved, never by the stop), each run's
verdict follows the rate the device made, and the report and the plot are written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

BENCH = Path(__file__).resolve().parent.parent / "bench" / "lab_stalls.py"


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
    assert stopped["stops"] >= 1, stopped
    # each stop (5 ms at least) was seen by the device: it made a frame at least that late
    assert stopped["device_lateness_max_us"] >= 4_000, stopped
    for run in (quiet, stopped):
        assert run["loopbacks"] > 0, run
        # at most twice its rate over the catch-up window of that step: 50 µs, or twice the
        # shorter of the device's own last two steps (a stop is one step, so it never widens
        # it; a busy machine's slow steps do, and the bound follows them)
        period_ns = 1e9 / run["fps_configured"]
        window = run["burst_window_ns"]
        assert window >= 50_000, run
        assert run["burst_max_frames"] <= window / (period_ns / 2) + 1, run
        # the verdict follows the rate the device made over the measured window
        made, configured = run["fps_measured"], run["fps_configured"]
        assert (run["verdict"] == "overloaded") == (made < 0.98 * configured), run
    measures = [row["measure"] for row in r["rows"]]
    assert "p99 stopped / quiet (worst of each)" in measures
    assert "most frames made in one step, all runs" in measures
    assert all(row["met"] in (True, False, None) for row in r["rows"])
    assert json.loads((tmp_path / "results.json").read_text())["runs"] == r["runs"]
    assert (tmp_path / "lab-stalls.png").stat().st_size > 1000


def test_bad_options_are_refused_with_what_is_allowed() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--pairs", "0"], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 2
    assert "--pairs must be >= 1" in out.stderr
