"""`rtloop.bench`: the benchmarks called from Python run the library the command runs and
return its report typed; each report type names exactly the fields the library gives (checked
on real, short runs), and bad configs are refused saying what is allowed."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

import rtloop.bench
from rtloop.reports import (
    FieldTripBenchReport,
    PeersBenchReport,
    PipelineBenchReport,
    RuntimeBenchReport,
    StreamBenchReport,
    VerifyReport,
)

pytestmark = pytest.mark.timeout(300)


def test_verify_from_python_is_the_commands_verify() -> None:
    r = rtloop.bench.verify(packets=20_000, pairs=1, packet_bytes=1024)
    VerifyReport.check(r)
    assert isinstance(r, VerifyReport)
    assert (r.ok, r.errors, r.lost, r.missing) == (20_000, 0, 0, 0)
    assert r["check"] == "all" and r.mode == "lossless"
    cli = subprocess.run(
        [sys.executable, "-m", "rtloop", "--json", "verify", "--packets", "20000", "--packet-bytes", "1024"],
        capture_output=True, text=True, timeout=240,
    )
    assert cli.returncode == 0, cli.stderr
    theirs = json.loads(cli.stdout)
    assert set(theirs) == set(r)
    same = ["packets_per_pair", "pairs", "packet_bytes", "capacity", "mode", "check", "batch", "ok", "errors"]
    assert {k: theirs[k] for k in same} == {k: r[k] for k in same}


def test_stream_benchmark_report(tmp_path: Path) -> None:
    r = rtloop.bench.stream(quick=True, out=tmp_path)
    StreamBenchReport.check(r)
    assert r.throughput and r.latency and r.machine.cpus >= 1
    # each latency row names the hand-off without a ring it is judged against: a sleeping
    # reader against two processes waking each other on futex words, the rest against the
    # cache-line ping-pong
    refs = {row["name"]: row["reference"] for row in r.latency}
    assert refs["stream, blocking"] == refs["futex ping-pong (reference)"] == "futex ping-pong"
    assert refs["stream, spin"] == "cache-line ping-pong"
    assert all(row["ratio_p99_to_reference"] > 0 for row in r.latency)
    assert (tmp_path / "latency-futex-reference.png").exists()
    # out= writes the same report the command writes
    assert json.loads((tmp_path / "results.json").read_text()) == json.loads(json.dumps(r))


def test_fieldtrip_benchmark_report() -> None:
    r = rtloop.bench.fieldtrip(quick=True, transports=["tcp"], rounds=10)
    FieldTripBenchReport.check(r)
    assert r.faq and r.versus_reference
    assert all({"transport", "requests"} <= set(p) for p in r.paced)


def test_pipeline_benchmark_report(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="rtloop.bench"):
        r = rtloop.bench.pipeline(profile="intan64", quick=True, seconds=0.2, dir=tmp_path)
    PipelineBenchReport.check(r)
    assert r.profile == "intan64" and r.channels == 64 and r.stages
    # the benchmark's progress notes reach the `rtloop.bench` logger
    notes = [rec.getMessage() for rec in caplog.records if rec.name == "rtloop.bench"]
    assert any(n.endswith(" ...") for n in notes), notes


def test_runtime_benchmark_report() -> None:
    r = rtloop.bench.runtime(quick=True, no_python=True, packets=10)
    RuntimeBenchReport.check(r)
    assert r.bare_timer is not None and r.bare_timer.count > 0


def test_peers_benchmark_report() -> None:
    r = rtloop.bench.peers(quick=True, transports=["stream", "unix"], chunks=[16], readers=[1], channels=16,
                           rate=1000.0, rounds=1)
    PeersBenchReport.check(r)
    assert {t["transport"] for t in r.transports} >= {"stream", "unix"}


@pytest.mark.parametrize(
    "bench,config,message",
    [
        ("stream", {"repeat": 3}, "unknown field `repeat`, expected one of `quick`, `repeats`"),
        ("stream", {"repeats": 0}, "repeats = 0: allowed 1 to 50"),
        ("stream", {"repeats": "five"}, "invalid type: string \"five\", expected u32"),
        ("fieldtrip", {"transports": ["udp"]}, 'transports = "udp": allowed tcp, unix, inproc'),
        ("fieldtrip", {"rounds": 5}, "rounds = 5: allowed 10 to 1000000"),
        ("fieldtrip", {"poll": "sometimes"}, 'poll = "sometimes"'),
        ("pipeline", {"profile": "utah"}, 'profile = "utah": allowed neuropixels, intan64, custom'),
        ("pipeline", {"probes": 65}, "probes = 65: allowed 1 to 64"),
        ("pipeline", {"seconds": 0}, "seconds = 0: a number > 0"),
        ("runtime", {"part_seconds": -1}, "part_seconds = -1: a number > 0"),
        ("runtime", {"packets": 0}, "packets = 0: allowed 1 to 100000"),
        ("peers", {"chunks": []}, "chunks = []: give one or more"),
        ("peers", {"chunks": [0], "transports": ["stream"]}, "chunk 0 out of range: allowed 1..=65536"),
        ("peers", {"channels": 8, "transports": ["stream"]}, "channels 8 out of range: allowed 12..=65536"),
        ("peers", {"transports": ["carrier-pigeon"]}, "unknown variant `carrier-pigeon`"),
        ("peers", {"wait": ["sleep"]}, "unknown variant `sleep`, expected one of `auto`, `block`, `spin`"),
        ("verify", {"mode": "fast"}, 'mode = "fast": allowed lossless, latest'),
        ("verify", {"packet_bytes": 12}, "packet_bytes = 12: a multiple of 8 from 8 to 16777216"),
        ("verify", {"pairs": 0}, "pairs = 0: at least 1"),
    ],
)
def test_bad_configs_are_refused_saying_what_is_allowed(bench: str, config: Dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as e:
        getattr(rtloop.bench, bench)(**config)
    assert message in str(e.value)
