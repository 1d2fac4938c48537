"""The typed report classes: attributes over the library's dicts, nested reports typed, and
the check that keeps the Python classes naming the fields the Rust types give."""

from __future__ import annotations

import json

import pytest

from rtloop.reports import LoadtestReport, RecordReport, RunReport, Summary

SUMMARY = {"count": 3, "min_ns": 1, "p50_ns": 2, "p99_ns": 3, "p999_ns": 3, "max_ns": 3, "mean_ns": 2.0}


def _run_report() -> dict:
    proc = {
        "name": "filter", "kind": "module", "runs": "python", "core": None, "ticks": 10,
        "exec": SUMMARY, "done_after_start": None, "misses": 0, "input_overruns": 0,
        "summary": "", "error": None, "delay": None,
    }
    return {
        "model": "m", "tick_ns": 1_000_000, "ticks": 10, "seconds": 0.01,
        "realtime": {"fifo": False, "mlock": False, "pin": True},
        "minimum_tick": {"min_ns": 100_000, "wake_p90_ns": 60_000, "handoff_p90_ns": 9_000},
        "tick_start": SUMMARY, "processes": [proc], "stopped_by": "ticks", "problem": None,
        "out_dir": "out/m",
    }


def test_fields_read_as_attributes_and_nested_reports_are_typed() -> None:
    r = RunReport.of(_run_report())
    RunReport.check(r)
    assert r.ticks == 10 and r.realtime.pin is True
    assert isinstance(r.tick_start, Summary) and r.tick_start.p99_ns == 3
    assert r.processes[0].exec.count == 3 and r.processes[0].done_after_start is None
    # still the dict it was: indexing and JSON as before
    assert r["processes"][0]["name"] == "filter"
    assert json.loads(json.dumps(r)) == _run_report()


def test_an_unknown_field_names_the_fields_there_are() -> None:
    r = RecordReport.of({"dir": "d", "samples": 1, "events": 0, "lost_samples": 0, "lost_events": 0, "bytes": 8, "seconds": 0.1, "ended": "stopped"})
    with pytest.raises(AttributeError, match=r"RecordReport has no field 'sample'; fields: dir, samples, events"):
        _ = r.sample


def test_check_names_every_field_the_two_sides_do_not_share() -> None:
    bad = _run_report()
    del bad["ticks"]
    bad["tick_count"] = 10
    bad["processes"][0]["extra"] = 1
    with pytest.raises(AssertionError) as e:
        RunReport.check(bad)
    msg = str(e.value)
    assert "RunReport: the library gives no ticks" in msg
    assert "RunReport: not declared: tick_count" in msg
    assert "RunReport.processes[0]: not declared: extra" in msg


def test_bad_input_is_refused_with_what_is_allowed() -> None:
    with pytest.raises(TypeError, match="LoadtestReport is read from a dict, got list"):
        LoadtestReport.of([])  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="RunReport.realtime is str, not a dict"):
        RunReport.check({**_run_report(), "realtime": "yes"})


def test_a_blocks_delay_is_typed() -> None:
    rep = _run_report()
    rep["processes"][0].update(runs="block bandpass", delay={"samples": 3.25, "ms": 0.108})
    r = RunReport.of(rep)
    RunReport.check(r)
    assert r.processes[0].delay.samples == 3.25 and r.processes[0].delay.ms == 0.108
