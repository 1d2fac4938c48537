"""The stream's guarantees under misuse: abandoned reservations, os.fork(), a writer that
closes while readers wait, chunks larger than the ring. Each test reproduces a report from
outside testing and says what the user gets."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rtloop import (
    ForkedHandleError,
    IncompleteWriteError,
    NotYetWrittenError,
    Stream,
    WriterBusyError,
    WriterClosedError,
    WriteTimeoutError,
)


def ramp(first: int, n: int, n_channels: int) -> np.ndarray:
    idx = np.arange(first, first + n, dtype=np.int64)[:, None] * 10 + np.arange(n_channels)
    return idx.astype("int32")


def test_cancelled_or_partly_committed_reservation_never_shows_stale_rows(
    stream_name: str,
) -> None:
    s = Stream.create(stream_name, n_channels=2, dtype="int32", capacity=128)
    cap = s.capacity
    r = s.reader()
    w = s.writer()
    w.push_chunk(ramp(0, cap, 2))
    res = w.reserve(100)
    res.view[:] = -1  # what an abandoned fill leaves in the slots
    res.cancel()
    res = w.reserve(100)
    res.view[:] = -2
    res.view[:10] = ramp(cap, 10, 2)
    res.commit(10)
    w.push_chunk(ramp(cap + 10, 1, 2))
    end = s.written
    # every window a reader is given is exactly what was written at those indices
    view = r.latest(cap)
    first = end - len(view)
    assert first > end - cap, "the slots the reservations wrote into are not offered"
    np.testing.assert_array_equal(view, ramp(first, len(view), 2))
    assert r.valid(view)
    # the rows the abandoned reservation may have overwritten are refused, not returned
    for a in range(end - cap, first):
        with pytest.raises(Exception, match="oldest kept sample"):
            r.read(a, end)


def _in_child(fn) -> int:
    """Run fn() in a child made by os.fork(); returns its exit code."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = fn()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_forked_child_neither_uses_nor_releases_the_parents_handles(
    stream_name: str,
) -> None:
    s = Stream.create(stream_name, n_channels=2, dtype="int32", capacity=64)
    w = s.writer()
    r = s.reader("lossless")
    w.push_chunk(ramp(0, 10, 2))

    def child() -> int:
        try:
            w.push_chunk(ramp(10, 1, 2))
            return 1
        except ForkedHandleError as e:
            if "fork" not in str(e):
                return 2
        try:
            r.pull_chunk()
            return 3
        except ForkedHandleError:
            pass
        try:
            Stream.open(stream_name).writer()
            return 4  # the parent still holds the writer
        except WriterBusyError:
            pass
        w.close()
        r.close()
        return 0  # exiting (and the handles' cleanup) must release nothing

    assert _in_child(child) == 0
    assert s.writer_liveness()["state"] == "active"
    assert s.writer_liveness()["pid"] == os.getpid()
    with pytest.raises(WriterBusyError):
        Stream.open(stream_name).writer()
    assert [x["mode"] for x in s.stats()["readers"]] == ["lossless"]
    # the parent goes on; its lossless reader gets every sample, none overwritten
    got = [r.pull_chunk(max_samples=100)[0]]
    for k in range(1, 20):
        w.push_chunk(ramp(k * 10, 10, 2))
        got.append(r.pull_chunk(max_samples=100)[0])
    np.testing.assert_array_equal(np.concatenate(got), ramp(0, 200, 2))


@pytest.mark.parametrize("mode", ["latest", "lossless"])
def test_iteration_and_blocking_pull_end_when_the_writer_closes(
    stream_name: str, mode: str
) -> None:
    s = Stream.create(stream_name, n_channels=2, dtype="int32", capacity=256)
    r = s.reader(mode)
    with s.writer() as w:
        for k in range(10):
            w.push_chunk(ramp(k * 7, 7, 2))
    chunks = [data for data, _ in r]  # ends after the last sample (StopIteration)
    np.testing.assert_array_equal(np.concatenate(chunks), ramp(0, 70, 2))
    with pytest.raises(WriterClosedError, match="closed the stream after 70 samples") as e:
        r.pull_chunk(timeout=None)
    assert e.value.written == 70
    with pytest.raises(WriterClosedError):
        r.wait(71)
    # a non-blocking pull just finds nothing
    assert len(r.pull_chunk(timeout=0.0)[0]) == 0


def test_chunk_larger_than_the_ring_that_fails_midway_says_how_much_was_written(
    stream_name: str,
) -> None:
    s = Stream.create(stream_name, n_channels=2, dtype="int32", capacity=64)
    cap = s.capacity
    stuck = s.reader("lossless")  # never reads: the second piece finds no room
    w = s.writer()
    w.timeout = 0.05
    with pytest.raises(IncompleteWriteError, match=f"wrote {cap} of {cap + 36}") as e:
        w.push_chunk(ramp(0, cap + 36, 2))
    assert (e.value.committed, e.value.requested) == (cap, cap + 36)
    assert isinstance(e.value.__cause__, WriteTimeoutError)
    assert s.written == cap
    np.testing.assert_array_equal(stuck.pull_chunk(max_samples=cap)[0], ramp(0, cap, 2))


def test_replace_takes_the_place_of_a_dead_or_closed_stream_but_not_a_live_one(
    stream_name: str, child
) -> None:
    from rtloop import StreamExistsError

    s = Stream.create(stream_name, n_channels=2, dtype="int32", capacity=64)
    # a writer in another process that dies without closing, as a crashed run leaves it
    c = child(
        """
        import sys, time, rtloop
        w = rtloop.Stream.open(sys.argv[1]).writer()
        print("writing", flush=True)
        time.sleep(60)
        """,
        stream_name,
    )
    c.expect("writing")
    # alive: refused, naming the writer
    with pytest.raises(StreamExistsError, match="writer .pid .* is alive") as e:
        Stream.create(stream_name, n_channels=4, dtype="float32", replace=True)
    assert e.value.pid == c.pid
    c.proc.kill()
    c.proc.wait()
    # dead: replaced; readers of the old stream keep their memory
    new = Stream.create(stream_name, n_channels=4, dtype="float32", replace=True)
    assert (new.n_channels, new.dtype) == (4, np.dtype("float32"))
    assert Stream.open(stream_name).n_channels == 4
    assert s.n_channels == 2
    # closed cleanly: replaced too
    new.writer().close()
    again = Stream.create(stream_name, n_channels=1, dtype="int16", replace=True)
    assert again.n_channels == 1
    # without replace an existing stream is still refused
    with pytest.raises(StreamExistsError, match="already exists"):
        Stream.create(stream_name, n_channels=1)


def test_replace_refuses_a_file_that_is_not_a_stream(make_name, shm_file) -> None:
    from rtloop import StreamExistsError

    name = make_name()
    path = shm_file(name, b"someone's notes" * 400)
    with pytest.raises(StreamExistsError):
        Stream.create(name, n_channels=1, replace=True)
    assert path.read_bytes().startswith(b"someone's notes")


def test_a_reader_can_start_at_the_oldest_kept_sample_and_event(stream_name: str) -> None:
    s = Stream.create(stream_name, n_channels=2, dtype="int32", capacity=64)
    w = s.writer()
    w.push_event("start", "run", 0)
    w.push_chunk(ramp(0, 10, 2))
    # a lossless reader opened after the writer began: from the newest by default...
    assert len(s.reader("lossless").pull_chunk()[0]) == 0
    # ...or from the oldest kept sample and event
    r = s.reader("lossless", start="oldest")
    np.testing.assert_array_equal(r.pull_chunk(max_samples=100)[0], ramp(0, 10, 2))
    assert [e.type for e in r.pull_events()] == ["start"]
    r2 = s.reader(start=4)
    np.testing.assert_array_equal(r2.pull_chunk(max_samples=100)[0], ramp(4, 6, 2))
    with pytest.raises(ValueError, match="'start' parameter"):
        s.reader(start="first")


def test_a_display_reader_can_skip_overruns_and_count_them(stream_name: str) -> None:
    s = Stream.create(stream_name, n_channels=2, dtype="int32", capacity=64)
    cap = s.capacity
    r = s.reader(on_overrun="skip")
    w = s.writer()
    w.push_chunk(ramp(0, cap + 37, 2))  # laps the reader by 37 samples
    data, _ = r.pull_chunk(max_samples=cap)
    np.testing.assert_array_equal(data, ramp(37, cap, 2))
    assert r.lost == 37
    with pytest.raises(ValueError, match="'on_overrun' parameter"):
        s.reader(on_overrun="ignore")


@pytest.mark.parametrize("end", ["commit", "partial", "cancel"])
def test_views_of_a_reservation_cannot_change_the_stream_after_it_ends(
    stream_name: str, end: str
) -> None:
    s = Stream.create(stream_name, n_channels=2, dtype="int32", capacity=64)
    r = s.reader()
    w = s.writer()
    w.push_chunk(ramp(0, 4, 2))
    res = w.reserve(4)
    col = res.view[:, 0]  # views taken while the reservation is open
    rows = res.view[1:]
    res.view[:] = ramp(4, 4, 2)
    if end == "commit":
        res.commit()
    elif end == "partial":
        res.commit(2)
    else:
        res.cancel()
    written = s.written
    assert written == {"commit": 8, "partial": 6, "cancel": 4}[end]
    published = ramp(0, written, 2)
    np.testing.assert_array_equal(r.read(0, written)[0], published)
    # the reservation's own view refuses writes, even after asking numpy to allow them
    with pytest.raises(ValueError, match="read-only"):
        res.view[0, 0] = -1
    try:
        res.view.flags.writeable = True
        res.view[:] = -1
    except ValueError:
        pass  # refused: as good
    # views derived from it before may still take writes, but never into the stream
    for v in (col, rows):
        try:
            v[...] = -7
        except ValueError:
            pass
    np.testing.assert_array_equal(r.read(0, written)[0], published)
    assert r.valid(r.window(0, written))
    # the next write lands where it belongs and the old views cannot reach it either
    w.push_chunk(ramp(written, 4, 2))
    col[...] = -9
    np.testing.assert_array_equal(r.read(0, written + 4)[0], ramp(0, written + 4, 2))


def test_latest_beyond_the_capacity_and_seek_past_written_say_what_is_allowed(
    stream_name: str,
) -> None:
    s = Stream.create(stream_name, n_channels=2, dtype="int32", capacity=64)
    cap = s.capacity
    w = s.writer()
    w.push_chunk(ramp(0, 10, 2))
    r = s.reader()
    with pytest.raises(ValueError, match=rf"latest {cap + 1} samples: the stream keeps {cap}"):
        r.latest(cap + 1)
    assert len(r.latest(cap)) == 10
    r.seek(3)
    with pytest.raises(NotYetWrittenError, match=r"seek to sample 11: only 10 samples") as e:
        r.seek(11)
    assert e.value.written == 10
    assert r.cursor == 3, "a refused seek leaves the cursor where it was"
    np.testing.assert_array_equal(r.pull_chunk(max_samples=100)[0], ramp(3, 7, 2))
    with pytest.raises(NotYetWrittenError, match="seek to sample 20"):
        s.reader(start=20)
    r2 = s.reader(start=10)  # `written` itself is allowed: it gets what comes next
    w.push_chunk(ramp(10, 2, 2))
    np.testing.assert_array_equal(r2.pull_chunk(max_samples=100)[0], ramp(10, 2, 2))
