"""What rtloop shows about a stream's life is true: a second run never resolves the first
run's ended stream, ended streams give their memory back without being named, and internal
or damaged streams are shown for what they are."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import rtloop
from rtloop import _rtloop

from test_cli import run

RUN = """
import sys, time, numpy as np, rtloop
name, run_id, mode = sys.argv[1], float(sys.argv[2]), sys.argv[3]
s = rtloop.Stream.create(name, n_channels=2, dtype="float32", sfreq=1000.0,
                         content_type="EEG-%s" % name[-8:], replace=True)
w = s.writer()
w.push_chunk(np.full((5000, 2), run_id, dtype=np.float32))
print("wrote", flush=True)
if mode == "close":
    w.close()
elif mode == "hold":
    sys.stdin.readline()
    w.close()
elif mode == "die":
    sys.stdout.flush()
    import os; os.kill(os.getpid(), 9)
"""


def test_a_second_run_resolves_its_own_stream_never_the_first_runs(
    child: Callable[..., object], stream_name: str
) -> None:
    kind = "EEG-" + stream_name[-8:]
    first = child(RUN, stream_name, "1", "close")
    first.expect("wrote")
    assert first.finish()[0] == 0
    # the first run ended: nothing of it is resolved, not even with minimum=1
    t0 = time.monotonic()
    assert rtloop.resolve_streams(type=kind, minimum=1, timeout=0.5) == []
    assert time.monotonic() - t0 >= 0.45, "minimum=1 waits for a live stream"
    assert stream_name not in rtloop.Stream.list(), "a clean close gives the name back"
    second = child(RUN, stream_name, "2", "hold")
    second.expect("wrote")
    found = rtloop.resolve_streams(type=kind, minimum=1, timeout=30)
    assert [i.name for i in found] == [stream_name]
    assert found[0].state == "live"
    reader = found[0].open().reader(start="oldest")
    data, _ = reader.pull_chunk(max_samples=10_000, timeout=5.0)
    assert data.shape == (5000, 2)
    assert np.all(data == 2.0), "the reader reads the second run's data"
    second.send("")
    assert second.finish()[0] == 0


def test_a_dead_writers_stream_is_reclaimed_by_the_next_listing_and_said_so(
    child: Callable[..., object], stream_name: str
) -> None:
    dead = child(RUN, stream_name, "3", "die")
    dead.expect("wrote")
    dead.finish()
    path = Path(_rtloop.stream_path(stream_name))
    assert path.exists(), "a killed writer leaves its stream until the next listing"
    out = run("stream", "list")
    assert out.returncode == 0, out.stderr
    assert f"reclaimed {stream_name}" in out.stderr and "ended without closing" in out.stderr
    assert stream_name not in out.stdout
    assert not path.exists(), "its memory came back"


def test_gc_says_what_it_freed(child: Callable[..., object], stream_name: str) -> None:
    dead = child(RUN, stream_name, "4", "die")
    dead.expect("wrote")
    dead.finish()
    out = run("--json", "stream", "gc")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    freed = {f["name"]: f for f in doc["freed"]}
    assert stream_name in freed, doc
    assert freed[stream_name]["bytes"] > 0 and "dead" in freed[stream_name]["why"]
    assert run("stream", "gc").stdout.startswith("nothing to free") or stream_name not in run(
        "stream", "gc"
    ).stdout


def test_kept_closed_streams_are_ended_and_shown_only_when_asked(stream_name: str) -> None:
    s = rtloop.Stream.create(stream_name, n_channels=1, sfreq=10.0, content_type="kept-x", keep=True)
    assert s.keep
    with s.writer() as w:
        w.push_chunk(np.zeros((3, 1), np.float32))
    assert s.state == "closed"
    assert rtloop.resolve_streams(name=stream_name) == [], "a closed stream is not live"
    got = rtloop.resolve_streams(name=stream_name, ended=True)
    assert [(i.name, i.state) for i in got] == [(stream_name, "closed")]
    listed = run("stream", "list")
    assert stream_name not in listed.stdout and "ended" in listed.stdout and "--all" in listed.stdout
    listed = run("stream", "list", "--all")
    row = next(line for line in listed.stdout.splitlines() if line.startswith(stream_name))
    assert " closed " in f" {row} "
    assert run("stream", "gc").returncode == 0
    assert stream_name in rtloop.Stream.list(), "gc leaves a kept stream"


def test_a_stream_waiting_for_its_writer_is_listed_not_resolved(stream_name: str) -> None:
    s = rtloop.Stream.create(stream_name, n_channels=1, sfreq=10.0)
    assert s.state == "waiting"
    assert rtloop.resolve_streams(name=stream_name) == []
    assert [i.state for i in rtloop.resolve_streams(name=stream_name, ended=True)] == ["waiting"]
    row = next(line for line in run("stream", "list").stdout.splitlines() if line.startswith(stream_name))
    assert "waiting" in row


def test_internal_streams_are_hidden_unless_asked_for(stream_name: str) -> None:
    s = _rtloop.Stream.create(stream_name, "uint32", 1, 0.0, 1024, 16, [], [], internal=True)
    w = s.writer()
    assert s.internal
    assert rtloop.resolve_streams(name=stream_name) == []
    assert [i.internal for i in rtloop.resolve_streams(name=stream_name, internal=True)] == [True]
    out = run("stream", "list")
    assert stream_name not in out.stdout and "--internal" in out.stdout
    assert stream_name in run("stream", "list", "--internal").stdout
    del w


def test_a_damaged_stream_says_damaged_and_why(
    stream_name: str, shm_file: Callable[[str, bytes], Path]
) -> None:
    shm_file(stream_name, b"\x01" * 8192)
    assert rtloop.resolve_streams(name=stream_name) == []
    got = rtloop.resolve_streams(name=stream_name, ended=True)
    assert len(got) == 1 and got[0].state == "damaged"
    assert "not the stream magic" in got[0].damage
    row = next(
        line for line in run("stream", "list", "--all").stdout.splitlines() if line.startswith(stream_name)
    )
    assert "damaged" in row and "magic" in row
    doc = json.loads(run("--json", "stream", "list", "--all").stdout)
    mine = [r for r in doc if r["name"] == stream_name]
    assert mine and mine[0]["state"] == "damaged" and "magic" in mine[0]["error"]


def damage_written_counter(s: rtloop.Stream, value: int) -> None:
    """Write `value` over the samples' `written` counter from outside, as a stray process
    writing into the shared-memory directory would."""
    with open(s.path, "r+b") as f:
        f.seek(s._s._samples_written_file_offset)
        f.write(value.to_bytes(8, sys.byteorder))


def test_a_stream_whose_counters_were_overwritten_is_damaged_not_counted(stream_name: str) -> None:
    """The outside finding: a damaged stream showed counters near 1e18. Its counters are not
    shown as if true anywhere: state, resolve, the list and its JSON say "damaged" and why."""
    s = rtloop.Stream.create(stream_name, n_channels=2, dtype="float32", sfreq=100.0)
    w = s.writer()
    w.push_chunk(np.zeros((20, 2), np.float32))
    assert s.state == "live" and s.damage is None
    damage_written_counter(s, 987_654_321_987_654_321)
    assert s.state == "damaged"
    assert s.damage is not None and "sample counters cannot be right" in s.damage
    assert rtloop.resolve_streams(name=stream_name) == [], "a damaged stream is never live"
    got = rtloop.resolve_streams(name=stream_name, ended=True)
    assert [(i.state, i.damage) for i in got] == [("damaged", s.damage)]
    row = next(
        line for line in run("stream", "list", "--all").stdout.splitlines() if line.startswith(stream_name)
    )
    # its shape is shown; no counter column holds the damaged count (only the reason names it)
    assert "float32" in row and "damaged" in row and "cannot be right" in row
    before_reason = row.split("damaged", 1)[0]
    assert "987654321987654321" not in before_reason, row
    doc = json.loads(run("--json", "stream", "list", "--all").stdout)
    mine = [r for r in doc if r["name"] == stream_name]
    assert mine and mine[0]["state"] == "damaged" and "cannot be right" in mine[0]["error"]
    assert "written" not in mine[0]
    # put back as the writer left it, the stream is whole and live again
    damage_written_counter(s, 20)
    assert s.state == "live" and s.damage is None
    w.close()


def test_bad_arguments_to_resolve_say_what_is_allowed() -> None:
    with pytest.raises(TypeError, match="ended"):
        rtloop.resolve_streams(ended="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="internal"):
        rtloop.resolve_streams(internal=1)  # type: ignore[arg-type]
