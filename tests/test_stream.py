"""The Python stream API: rtloop.Stream / Writer / Reader over real shared memory."""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import rtloop
from rtloop import _rtloop
from rtloop import (
    LayoutVersionError,
    NotAStreamError,
    NotYetWrittenError,
    OverrunError,
    RtloopError,
    Stream,
    StreamExistsError,
    StreamNotFoundError,
    TooOldError,
    WriterBusyError,
    WriterDeadError,
    WriteTimeoutError,
)


def ramp(first: int, n: int, n_channels: int, dtype: str = "int32") -> np.ndarray:
    """Samples first..first+n, value = sample * 10 + channel."""
    idx = np.arange(first, first + n, dtype=np.int64)[:, None] * 10 + np.arange(n_channels)
    return idx.astype(dtype)


# ---------------------------------------------------------------- create / open / list


def test_create_open_list_remove(stream_name: str) -> None:
    s = Stream.create(
        stream_name,
        n_channels=3,
        dtype="int16",
        sfreq=30000.0,
        capacity=1000,
        ch_names=["a", "b", "c"],
        ch_units=["uV", "uV", "mV"],
        event_capacity=16,
    )
    assert s.name == stream_name
    assert s.dtype == np.dtype("int16")
    assert s.n_channels == 3
    assert s.sfreq == 30000.0
    assert s.ch_names == ["a", "b", "c"]
    assert s.ch_units == ["uV", "uV", "mV"]
    assert s.capacity >= 1000
    assert s.event_capacity >= 16
    assert s.written == 0
    assert s.occupancy == 0.0
    assert stream_name in Stream.list()
    assert s.path.endswith(f"rtloop-{stream_name}")
    assert oct(os.stat(s.path).st_mode & 0o777) == oct(0o600)

    o = Stream.open(stream_name)
    assert (o.name, o.dtype, o.n_channels, o.capacity) == (s.name, s.dtype, 3, s.capacity)
    assert o.ch_names == s.ch_names
    assert stream_name in repr(o)

    with pytest.raises(StreamExistsError, match="already exists") as e:
        Stream.create(stream_name, n_channels=1)
    # Python names in a Python error
    assert f"rtloop.Stream.remove({stream_name!r})" in str(e.value).replace('"', "'")
    assert "Stream::remove" not in str(e.value)

    Stream.remove(stream_name)
    assert stream_name not in Stream.list()
    with pytest.raises(StreamNotFoundError, match="no stream named"):
        Stream.open(stream_name)
    with pytest.raises(StreamNotFoundError, match="no stream named"):
        Stream.remove(stream_name)


def test_default_channel_names_and_dtype_spellings(make_name) -> None:
    s = Stream.create(make_name(), n_channels=2, dtype=np.float64)
    assert s.dtype == np.float64
    assert s.ch_names == ["ch0", "ch1"]
    assert s.ch_units == ["", ""]
    t = Stream.create(make_name(), n_channels=1, dtype=np.dtype("uint8"))
    assert t.dtype == np.uint8


@pytest.mark.parametrize("dtype", rtloop.DTYPES)
def test_every_dtype_round_trips_bit_identically(stream_name: str, dtype: str) -> None:
    s = Stream.create(stream_name, n_channels=5, dtype=dtype, capacity=4096)
    r = s.reader()
    rng = np.random.default_rng(7)
    # arbitrary bit patterns, including NaN payloads and negative zero for floats
    data = np.frombuffer(rng.bytes(100 * 5 * np.dtype(dtype).itemsize), dtype=dtype)
    data = data.reshape(100, 5)
    with s.writer() as w:
        assert w.push_chunk(data) == 100
    got, ts = r.pull_chunk(max_samples=1000)
    assert got.dtype == np.dtype(dtype)
    assert got.shape == (100, 5)
    assert got.tobytes() == data.tobytes()
    assert ts.dtype == np.float64 and ts.shape == (100,)
    assert r.window(0, 100).tobytes() == data.tobytes()
    copy, _ = r.read(0, 100)
    assert copy.tobytes() == data.tobytes()


def test_push_and_pull_across_the_wrap(stream_name: str) -> None:
    s = Stream.create(stream_name, n_channels=4, dtype="int32", capacity=1)
    cap = s.capacity  # rounded up to whole pages
    r = s.reader("lossless")
    w = s.writer()
    pos = 0
    got = []
    chunk = cap // 3 + 7  # chunks that straddle the wrap at different offsets
    while pos < 5 * cap:
        w.push_chunk(ramp(pos, chunk, 4))
        pos += chunk
        data, _ = r.pull_chunk(max_samples=cap)
        got.append(data)
    all_data = np.concatenate(got)
    np.testing.assert_array_equal(all_data, ramp(0, pos, 4))
    # a window across the wrap is one contiguous (n_samples, n_channels) view
    first = pos - cap + 3
    v = r.window(first, pos)
    assert v.flags.c_contiguous
    np.testing.assert_array_equal(v, ramp(first, pos - first, 4))
    np.testing.assert_array_equal(r.latest(10), ramp(pos - 10, 10, 4))


def test_chunk_larger_than_capacity_is_written_in_pieces(stream_name: str) -> None:
    s = Stream.create(stream_name, n_channels=2, dtype="int32", capacity=1)
    cap = s.capacity
    r = s.reader()
    w = s.writer()
    w.push_chunk(ramp(0, 3 * cap + 5, 2))
    assert s.written == 3 * cap + 5
    np.testing.assert_array_equal(r.latest(cap), ramp(2 * cap + 5, cap, 2))


def test_push_sample_and_pull_sample(stream_name: str) -> None:
    s = Stream.create(stream_name, n_channels=3, dtype="float32")
    r = s.reader()
    w = s.writer()
    assert r.pull_sample() == (None, None)
    w.push_sample(np.array([1.0, 2.0, 3.0], dtype=np.float32))
    w.push_chunk(np.array([4.0, 5.0, 6.0], dtype=np.float32))  # 1-D: one sample
    sample, ts = r.pull_sample()
    assert sample is not None and ts is not None
    np.testing.assert_array_equal(sample, [1.0, 2.0, 3.0])
    assert sample.shape == (3,)
    sample, _ = r.pull_sample()
    np.testing.assert_array_equal(sample, [4.0, 5.0, 6.0])
    assert r.available == 0


def test_cursor_seek_and_wait(stream_name: str) -> None:
    s = Stream.create(stream_name, n_channels=1, dtype="int64")
    w = s.writer()
    w.push_chunk(np.arange(10, dtype=np.int64)[:, None])
    r = s.reader()  # starts at the newest sample
    assert (r.cursor, r.available, r.written) == (10, 0, 10)
    r.seek(4)
    assert r.available == 6
    data, _ = r.pull_chunk(max_samples=3)
    np.testing.assert_array_equal(data[:, 0], [4, 5, 6])
    assert r.cursor == 7
    assert r.wait(10, timeout=0.0) == 10
    with pytest.raises(TimeoutError, match="timed out waiting for sample 11"):
        r.wait(11, timeout=0.05)
    data, ts = r.pull_chunk(timeout=0.05)  # 3 waiting: returned at once
    assert len(data) == 3
    data, ts = r.pull_chunk(timeout=0.05)  # nothing comes: empty, not an error
    assert data.shape == (0, 1) and ts.shape == (0,)


def test_timestamps_are_monotonic_clock_seconds(stream_name: str) -> None:
    s = Stream.create(stream_name, n_channels=2, dtype="float64")
    r = s.reader()
    w = s.writer()
    before = rtloop.local_clock()
    for i in range(20):
        w.push_chunk(np.full((3, 2), i, dtype=np.float64))
    after = rtloop.local_clock()
    _, ts = r.pull_chunk(max_samples=100)
    assert len(ts) == 60
    assert np.all(np.diff(ts) >= 0)
    assert before <= ts[0] and ts[-1] <= after
    # an explicit stamp is kept (to the ns)
    w.push_chunk(np.zeros((2, 2)), timestamp=12.5)
    _, ts = r.pull_chunk()
    np.testing.assert_allclose(ts, [12.5, 12.5])


def test_samples_of_a_chunk_get_their_own_times_in_a_regular_stream(make_name) -> None:
    """As pylsl: the last sample of a chunk has the chunk's timestamp, each earlier one is
    one period (1 / sfreq) earlier; pulls, reads and get_data that cut a chunk agree. An
    irregular stream gives every sample of a chunk the chunk's timestamp."""
    s = Stream.create(make_name(), n_channels=2, dtype="float64", sfreq=100.0)
    r = s.reader()
    w = s.writer()
    w.push_chunk(np.zeros((10, 2)), timestamp=50.0)
    w.push_chunk(np.zeros((5, 2)), timestamp=60.0)
    want = np.r_[50.0 - np.arange(9, -1, -1) / 100.0, 60.0 - np.arange(4, -1, -1) / 100.0]
    # a pull that ends inside the first chunk still back-dates from that chunk's last sample
    _, head = r.pull_chunk(max_samples=4)
    _, rest = r.pull_chunk(max_samples=100)
    np.testing.assert_allclose(np.r_[head, rest], want, rtol=0, atol=1e-9)
    _, ts = r.read(3, 12)
    np.testing.assert_allclose(ts, want[3:12], rtol=0, atol=1e-9)
    _, ts = r.get_data(winsize=0.07)  # the newest 7 samples
    np.testing.assert_allclose(ts, want[-7:], rtol=0, atol=1e-9)
    _, ts = r.get_data(winsize=0.07, copy=False)
    np.testing.assert_allclose(ts, want[-7:], rtol=0, atol=1e-9)

    irr = Stream.create(make_name(), n_channels=1, dtype="float64")
    ri = irr.reader()
    wi = irr.writer()
    wi.push_chunk(np.zeros((3, 1)), timestamp=7.0)
    _, ts = ri.pull_chunk()
    np.testing.assert_allclose(ts, [7.0, 7.0, 7.0])


# ---------------------------------------------------------------- zero-copy views


def test_zero_copy_views_are_read_only_and_share_memory(stream_name: str) -> None:
    s = Stream.create(stream_name, n_channels=2, dtype="int32", capacity=1)
    cap = s.capacity
    r = s.reader()
    w = s.writer()
    w.push_chunk(ramp(0, 10, 2))
    v = r.window(0, 10)
    assert v.shape == (10, 2)
    assert not v.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        v[0, 0] = 1
    with pytest.raises(ValueError):
        v.flags.writeable = True
    assert np.shares_memory(v, r.latest(10))
    assert r.valid(v)
    r.check(v[2:5])  # slices of a view are checked through their base
    # the writer laps the window: the kept view shows the new data (it is the ring's
    # memory), and the validity API says so
    w.push_chunk(ramp(10, cap, 2))
    np.testing.assert_array_equal(v, ramp(cap, 10, 2))
    assert not r.valid(v)
    with pytest.raises(OverrunError, match="overwritten") as e:
        r.check(v)
    assert e.value.lost == 10
    with pytest.raises(TypeError, match="zero-copy view"):
        r.check(np.zeros((2, 2), dtype=np.int32))


def test_view_keeps_the_mapping_alive(stream_name: str) -> None:
    s = Stream.create(stream_name, n_channels=3, dtype="float32")
    r = s.reader()
    w = s.writer()
    w.push_chunk(ramp(0, 50, 3, "float32"))
    v = r.window(10, 40)[5:]
    w.close()
    r.close()
    del s, r, w
    gc.collect()
    # the clean close removed the name: only the view holds the memory now
    assert stream_name not in Stream.list()
    gc.collect()
    # still mapped through the view's base object
    np.testing.assert_array_equal(v, ramp(15, 25, 3, "float32"))
    assert float(v.sum()) == float(ramp(15, 25, 3, "float32").sum())


def test_reserve_fills_in_place_then_commits(stream_name: str) -> None:
    s = Stream.create(stream_name, n_channels=4, dtype="int16", capacity=1)
    cap = s.capacity
    r = s.reader()
    w = s.writer()
    w.push_chunk(ramp(0, cap - 3, 4, "int16"))  # the next reservation straddles the wrap
    with w.reserve(8) as buf:
        assert buf.shape == (8, 4) and buf.dtype == np.int16 and buf.flags.writeable
        buf[:] = ramp(cap - 3, 8, 4, "int16")
        assert s.written == cap - 3  # nothing is published before the commit
    assert not buf.flags.writeable
    assert s.written == cap + 5
    np.testing.assert_array_equal(r.latest(8), ramp(cap - 3, 8, 4, "int16"))

    res = w.reserve(5)
    res.view[:2] = 7
    assert res.commit(2) == cap + 7
    np.testing.assert_array_equal(r.latest(2), np.full((2, 4), 7, dtype=np.int16))

    with pytest.raises(KeyError):
        with w.reserve(3) as buf:
            buf[:] = 9
            raise KeyError("abandon")
    assert s.written == cap + 7  # an exception cancels the reservation

    res = w.reserve(2)
    with pytest.raises(RtloopError, match="reservation of 2 samples is open"):
        w.push_chunk(np.zeros((1, 4), dtype=np.int16))
    res.cancel()
    w.push_chunk(np.zeros((1, 4), dtype=np.int16))
    assert s.written == cap + 8


# ---------------------------------------------------------------- modes


def test_overrun_raises_with_the_exact_loss_and_continues(stream_name: str) -> None:
    s = Stream.create(stream_name, n_channels=2, dtype="int32", capacity=1)
    cap = s.capacity
    r = s.reader("latest")
    w = s.writer()
    w.push_chunk(ramp(0, cap + 37, 2))
    with pytest.raises(OverrunError, match="37 samples were overwritten") as e:
        r.pull_chunk()
    assert e.value.lost == 37
    assert e.value.oldest == 37
    assert isinstance(e.value, RtloopError)
    data, _ = r.pull_chunk(max_samples=cap)
    np.testing.assert_array_equal(data, ramp(37, cap, 2))
    st = s.stats()
    assert st["overruns"] == 1 and st["lost_samples"] == 37


def test_lossless_reader_holds_the_writer_back(stream_name: str) -> None:
    s = Stream.create(stream_name, n_channels=2, dtype="int32", capacity=1)
    cap = s.capacity
    r = s.reader("lossless")
    w = s.writer(timeout=0.2)
    w.push_chunk(ramp(0, cap, 2))
    assert s.occupancy == 100.0
    with pytest.raises(WriteTimeoutError, match="did not make room") as e:
        w.push_chunk(ramp(cap, 1, 2))
    assert e.value.reader_pid == os.getpid()
    assert e.value.needed_end == cap + 1
    assert "lossless" in str(e.value)
    assert s.written == cap  # nothing was written, nothing was lost
    data, _ = r.pull_chunk(max_samples=cap)
    np.testing.assert_array_equal(data, ramp(0, cap, 2))
    w.push_chunk(ramp(cap, 1, 2))  # room again
    r.close()  # a closed lossless reader no longer holds the writer
    w.push_chunk(ramp(cap + 1, 2 * cap, 2))
    assert s.written == 3 * cap + 1


def test_second_writer_is_refused_naming_the_pid(stream_name: str, child) -> None:
    # kept: the test hands the one stream from writer to writer
    s = Stream.create(stream_name, n_channels=1, dtype="uint8", keep=True)
    w = s.writer()
    with pytest.raises(WriterBusyError, match=f"already has a writer \\(pid {os.getpid()}\\)") as e:
        Stream.open(stream_name).writer()
    assert e.value.pid == os.getpid()
    w.close()
    # in another process
    c = child(
        """
        import sys, rtloop
        w = rtloop.Stream.open(sys.argv[1]).writer()
        print("holding", flush=True)
        sys.stdin.readline()
        """,
        stream_name,
    )
    c.expect("holding")
    with pytest.raises(WriterBusyError, match=f"pid {c.pid}") as e:
        s.writer()
    assert e.value.pid == c.pid
    c.send("done")
    assert c.finish()[0] == 0
    s.writer().close()  # free again once the holder is gone


def test_events_round_trip(stream_name: str) -> None:
    s = Stream.create(stream_name, n_channels=1, event_capacity=8)
    r = s.reader()
    w = s.writer()
    values = [
        ("trigger", 3),
        ("trigger", 2.5),
        ("label", "stim on"),
        (7, np.array([1, -2, 3], dtype=np.int16)),
        ("gains", np.array([0.5, 1.5], dtype=np.float32)),
        ("one", np.uint64(2**64 - 1)),
    ]
    for i, (t, v) in enumerate(values):
        assert w.push_event(t, v, sample=100 + i, offset=-i, duration=2 * i) == i
    got = r.pull_events()
    assert len(got) == len(values)
    for i, (ev, (t, v)) in enumerate(zip(got, values)):
        assert ev.type == t
        if isinstance(v, np.ndarray):
            assert ev.value.dtype == v.dtype
            np.testing.assert_array_equal(ev.value, v)
        else:
            assert ev.value == v and type(ev.value) is type(v if not isinstance(v, np.generic) else v.item())
        assert (ev.sample, ev.offset, ev.duration) == (100 + i, -i, 2 * i)
        assert ev.timestamp > 0
    assert r.pull_events() == []
    assert r.read_events(1, 3) == got[1:3]
    assert r.events_written == len(values)
    with pytest.raises(TypeError, match="'value' parameter"):
        w.push_event("x", [1, 2], 0)
    with pytest.raises(TypeError, match="bool"):
        w.push_event("x", np.bool_(True), 0)
    with pytest.raises(ValueError, match="at most"):
        w.push_event("x", "y" * 1000, 0)
    with pytest.raises(NotYetWrittenError):
        r.read_events(0, 99)
    again = r.read_events(0, len(values))  # intact after the refusals
    assert [e.type for e in again] == [e.type for e in got]
    assert [e.sample for e in again] == [e.sample for e in got]
    for a, b in zip(again, got):
        np.testing.assert_array_equal(a.value, b.value)


# ---------------------------------------------------------------- bad input


@pytest.fixture
def filled(stream_name: str):
    """A 4-channel int16 stream with 100 known samples, its writer and a reader."""
    s = Stream.create(stream_name, n_channels=4, dtype="int16", capacity=1)
    w = s.writer()
    w.push_chunk(ramp(0, 100, 4, "int16"))
    r = s.reader()
    yield s, w, r
    r.seek(0)
    np.testing.assert_array_equal(r.read(0, 100)[0], ramp(0, 100, 4, "int16"))
    assert s.written >= 100


def test_wrong_dtype_is_refused_without_casting(filled) -> None:
    s, w, r = filled
    with pytest.raises(TypeError, match="holds int16 samples.*dtype float32.*does not cast"):
        w.push_chunk(np.zeros((2, 4), dtype=np.float32))
    with pytest.raises(TypeError, match="holds int16 samples.*dtype int32"):
        w.push_sample(np.zeros(4, dtype=np.int32))
    with pytest.raises(TypeError, match=r"must be a numpy array of dtype int16 and shape \(n_samples, 4\) \(or a list"):
        w.push_chunk("1234")  # type: ignore[arg-type]
    # the same type in the other byte order is named as such (the names alone are equal)
    with pytest.raises(TypeError, match=r"dtype >i2 \(big-endian int16\)"):
        w.push_chunk(np.zeros((2, 4), dtype=">i2"))


def test_lists_are_taken_as_pylsl_takes_them(filled) -> None:
    s, w, r = filled  # int16, 4 channels
    start = w.written
    w.push_sample([1, 2, 3, 4])
    w.push_chunk([[5, 6, 7, 8], [9, 10, 11, 12]])
    w.push_chunk((13, 14, 15, 16, 17, 18, 19, 20))        # flat: two samples, as pylsl's
    w.push_chunk([[21.0, 22.0, 23.0, 24.0]])              # whole floats fit an integer stream
    data, _ = r.read(start, w.written)
    np.testing.assert_array_equal(data, np.arange(1, 25, dtype=np.int16).reshape(6, 4))
    assert data.dtype == np.int16
    written = w.written
    # what would change a value is refused, and nothing is written
    for bad, error, message in [
        ([[70000, 0, 0, 0]], ValueError, "holds int16, which stores -32768 to 32767; the 'data' list has values from 0 to 70000"),
        ([[1.5, 0, 0, 0]], ValueError, "not whole numbers; round them first"),
        ([1, 2, 3], ValueError, "a flat list holds whole samples \\(4 values each\\), but got 3 values"),
        ([[1, 2], [3, 4, 5, 6]], ValueError, "ragged"),
        ([["a", "b", "c", "d"]], TypeError, "must hold numbers"),
        ([[True, False, True, False]], TypeError, "must hold numbers"),
    ]:
        with pytest.raises(error, match=message):
            w.push_chunk(bad)
    with pytest.raises(ValueError, match="a sample has shape \\(4,\\), but got shape \\(2,\\)"):
        w.push_sample([1, 2])
    assert w.written == written


def test_pull_chunk_refuses_positional_arguments_pylsl_orders_differently(filled) -> None:
    s, w, r = filled
    with pytest.raises(TypeError, match=r"keyword arguments only.*pylsl's pull_chunk\(timeout, max_samples\)"):
        r.pull_chunk(0)  # pylsl: timeout 0; here it would have been max_samples 0
    data, _ = r.pull_chunk(timeout=0.0, max_samples=5)  # either keyword order
    assert data.shape[1] == 4


def test_a_huge_count_is_explained(filled) -> None:
    s, w, r = filled
    with pytest.raises(ValueError, match=r"'max_samples' parameter. Allowed values are integers from 0 to 2\*\*64 - 1, but got 1180591620717411303424"):
        r.pull_chunk(max_samples=2**70)


def test_wrong_channel_count_is_refused(filled) -> None:
    s, w, r = filled
    with pytest.raises(ValueError, match=r"has 4 channels: expected shape \(n_samples, 4\), but got shape \(2, 3\)"):
        w.push_chunk(np.zeros((2, 3), dtype=np.int16))
    with pytest.raises(ValueError, match=r"one sample of shape \(4,\), but got shape \(5,\)"):
        w.push_chunk(np.zeros(5, dtype=np.int16))
    with pytest.raises(ValueError, match=r"expected shape \(n_samples, 4\)"):
        w.push_chunk(np.zeros((2, 2, 4), dtype=np.int16))
    with pytest.raises(ValueError, match=r"a sample has shape \(4,\)"):
        w.push_sample(np.zeros((1, 4), dtype=np.int16))


def test_non_contiguous_chunks_are_written_correctly(filled) -> None:
    s, w, r = filled
    r.seek(100)
    big = ramp(100, 20, 8, "int16")
    w.push_chunk(big[::2, ::2].copy())  # reference
    w.push_chunk(big[::2, ::2])  # a strided view is made contiguous, not refused
    a, _ = r.pull_chunk()
    np.testing.assert_array_equal(a[:10], a[10:])
    np.testing.assert_array_equal(a[:10], big[::2, ::2])
    r.seek(0)
    # the fixture then checks samples 0..100, so nothing else was written
    w.push_chunk(np.zeros((0, 4), dtype=np.int16))


def test_bad_windows_are_refused(stream_name: str) -> None:
    s = Stream.create(stream_name, n_channels=4, dtype="int16", capacity=1)
    cap = s.capacity
    w = s.writer()
    w.push_chunk(ramp(0, 100, 4, "int16"))
    r = s.reader()
    with pytest.raises(
        NotYetWrittenError, match=r"window \[90, 101\) reaches beyond the 100 samples"
    ) as e:
        r.window(90, 101)
    assert e.value.written == 100
    with pytest.raises(NotYetWrittenError):
        r.read(90, 101)
    with pytest.raises(ValueError, match="reversed"):
        r.window(50, 40)
    np.testing.assert_array_equal(r.window(0, 100), ramp(0, 100, 4, "int16"))
    w.push_chunk(ramp(100, cap, 4, "int16"))  # samples 0..100 fall out of the ring
    with pytest.raises(TooOldError, match="begins before the oldest kept sample 100") as e2:
        r.window(99, 120)
    assert e2.value.oldest == 100
    with pytest.raises(TooOldError, match="oldest kept"):
        r.read(0, 10)
    with pytest.raises(ValueError, match=f"the stream keeps {cap}; ask for at most {cap}"):
        r.latest(cap + 1)
    # what is kept is intact after the refusals
    np.testing.assert_array_equal(r.read(100, 100 + cap)[0], ramp(100, cap, 4, "int16"))
    assert s.written == 100 + cap


@pytest.mark.parametrize(
    "kwargs, exc, words",
    [
        ({"capacity": 0}, ValueError, "capacity must be at least 1"),
        ({"n_channels": 0}, ValueError, "at least 1 channel"),
        ({"event_capacity": 0}, ValueError, "event capacity must be at least 1"),
        ({"sfreq": -1.0}, ValueError, "finite number >= 0"),
        ({"sfreq": float("nan")}, ValueError, "finite number >= 0"),
        ({"dtype": "complex64"}, ValueError, "Allowed values are 'uint8'"),
        ({"dtype": "float16"}, ValueError, "but got 'float16' instead"),
        ({"capacity": 2**60}, ValueError, "needs .* bytes of shared memory"),
        ({"ch_names": ["a"]}, ValueError, "1 channel names given for 2 channels"),
        ({"ch_units": ["x" * 40, "y"]}, ValueError, "at most 15 bytes"),
        ({"capacity": -1}, ValueError, "Allowed values are integers from 0 to 2\\*\\*64 - 1"),
        ({"capacity": 1.5}, TypeError, "must be an integer"),
        ({"n_channels": True}, TypeError, "must be an integer, but got a bool"),
    ],
)
def test_bad_create_arguments(stream_name: str, kwargs, exc, words) -> None:
    args = {"n_channels": 2, **kwargs}
    with pytest.raises(exc, match=words):
        Stream.create(stream_name, **args)
    assert stream_name not in Stream.list()


@pytest.mark.parametrize(
    "name, words",
    [
        ("a/b", "invalid stream name"),
        ("", "invalid stream name"),
        ("x" * 65, "invalid stream name"),
        (".hidden", "not starting with '.'"),
    ],
)
def test_bad_names_are_refused(name: str, words: str) -> None:
    before = Stream.list()
    with pytest.raises(ValueError, match=words) as e:
        Stream.create(name, n_channels=1)
    assert "allowed: 1 to 64 characters" in str(e.value)
    with pytest.raises(ValueError, match=words):
        Stream.open(name)
    with pytest.raises(ValueError, match=words):
        Stream.remove(name)
    assert Stream.list() == before


def test_bad_reader_mode_and_arguments(filled) -> None:
    s, w, r = filled
    with pytest.raises(
        ValueError,
        match="Invalid value for the 'mode' parameter. Allowed values are 'latest' and "
        "'lossless', but got 'fast' instead.",
    ):
        s.reader("fast")
    with pytest.raises(TypeError, match="'timeout' parameter must be None or a number"):
        r.pull_chunk(timeout="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'timeout' parameter. Allowed values are None"):
        r.pull_chunk(timeout=-1.0)
    with pytest.raises(ValueError, match="'max_samples' parameter"):
        r.pull_chunk(max_samples=-5)
    with pytest.raises(TypeError, match="'name' parameter must be an instance of 'str'"):
        Stream.open(3)  # type: ignore[arg-type]


def test_foreign_file_is_not_a_stream(make_name, shm_file) -> None:
    name = make_name()
    shm_file(name, b"hello, I am not a stream" * 400)
    with pytest.raises(NotAStreamError, match="is not an rtloop stream"):
        Stream.open(name)
    small = make_name()
    shm_file(small, b"tiny")
    with pytest.raises(NotAStreamError, match="smaller than a stream header"):
        Stream.open(small)
    # the foreign files are listed by name (they are in the namespace) but left untouched
    assert Path(_path(name)).read_bytes()[:5] == b"hello"


def _path(name: str) -> str:
    return str(_rtloop.stream_path(name))


def test_other_layout_version_is_refused(make_name, shm_file) -> None:
    good = Stream.create(make_name(), n_channels=2, capacity=16)
    raw = bytearray(Path(good.path).read_bytes())
    current = int.from_bytes(raw[8:12], "little")  # layout_version follows the 8-byte magic
    raw[8:12] = (99).to_bytes(4, "little")
    name = make_name()
    shm_file(name, bytes(raw))
    with pytest.raises(LayoutVersionError, match="layout version 99") as e:
        Stream.open(name)
    assert (e.value.found, e.value.expected) == (99, current)
    assert current == 3


# ---------------------------------------------------------------- real processes


WRITER = """
import sys, numpy as np, rtloop
s = rtloop.Stream.open(sys.argv[1])
n, chunk = int(sys.argv[2]), int(sys.argv[3])
with s.writer() as w:
    print("writing", flush=True)
    for first in range(0, n, chunk):
        k = min(chunk, n - first)
        idx = np.arange(first, first + k, dtype=np.int64)[:, None] * 10 + np.arange(s.n_channels)
        w.push_chunk(idx.astype(np.int32))
print("done", flush=True)
"""


def test_writer_in_another_process(stream_name: str, child) -> None:
    s = Stream.create(stream_name, n_channels=3, dtype="int32", capacity=1)
    r = s.reader("lossless")  # registered before the writer starts: nothing is missed
    n = 20 * s.capacity + 17
    c = child(WRITER, stream_name, str(n), "333")
    got = []
    total = 0
    while total < n:
        data, ts = r.pull_chunk(max_samples=5000, timeout=None)
        got.append(data)
        total += len(data)
    np.testing.assert_array_equal(np.concatenate(got), ramp(0, n, 3))
    code, out, err = c.finish()
    assert code == 0, err
    assert "done" in out
    assert r.writer_liveness()["state"] == "closed"
    assert not r.writer_alive


def test_dead_writer_ends_a_wait(stream_name: str, child) -> None:
    s = Stream.create(stream_name, n_channels=1, dtype="int32")
    c = child(
        """
        import sys, numpy as np, rtloop
        w = rtloop.Stream.open(sys.argv[1]).writer()
        w.push_chunk(np.arange(5, dtype=np.int32)[:, None])
        print("wrote", flush=True)
        sys.stdin.readline()
        """,
        stream_name,
    )
    c.expect("wrote")
    r = s.reader()
    r.seek(0)
    assert r.writer_alive
    os.kill(c.pid, signal.SIGKILL)
    c.proc.wait()
    with pytest.raises(WriterDeadError, match=f"pid {c.pid}") as e:
        r.wait(6, timeout=None)
    assert (e.value.pid, e.value.written) == (c.pid, 5)
    data, _ = r.pull_chunk()  # what it wrote is intact
    np.testing.assert_array_equal(data[:, 0], np.arange(5))
    with pytest.raises(WriterDeadError):
        r.pull_chunk(timeout=None)
    assert s.writer_liveness() == {"state": "dead", "pid": c.pid}
    s.writer().close()  # a dead writer is replaced


def test_ctrl_c_interrupts_a_blocking_pull(stream_name: str, child) -> None:
    Stream.create(stream_name, n_channels=1)
    c = child(
        """
        import signal, sys, rtloop
        # Python only installs its Ctrl-C handler when SIGINT is not ignored at start, and a
        # suite started in the background (nohup, `&` in a script) passes SIGINT ignored
        signal.signal(signal.SIGINT, signal.default_int_handler)
        r = rtloop.Stream.open(sys.argv[1]).reader()
        print("waiting", flush=True)
        try:
            r.pull_chunk(timeout=None)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        """,
        stream_name,
    )
    c.expect("waiting")
    # interrupt it once it sleeps on the stream's futex, i.e. inside pull_chunk's wait
    wchan = Path(f"/proc/{c.pid}/wchan")
    while "futex" not in wchan.read_text():
        time.sleep(0.01)
    c.proc.send_signal(signal.SIGINT)
    assert c.expect("interrupted") == "interrupted"
    assert c.finish()[0] == 0


def test_blocking_wait_releases_the_gil(stream_name: str) -> None:
    s = Stream.create(stream_name, n_channels=2, dtype="float64")
    r = s.reader()
    w = s.writer()
    result = {}
    entered = threading.Event()

    def wait() -> None:
        entered.set()
        result["data"] = r.pull_chunk(timeout=None)[0]

    t = threading.Thread(target=wait)
    t.start()
    entered.wait()
    # go on once it sleeps on the stream's futex, i.e. inside pull_chunk's wait (not after a
    # sleep that a loaded machine may outlast)
    wchan = Path(f"/proc/self/task/{t.native_id}/wchan")
    deadline = time.monotonic() + 30
    while "futex" not in wchan.read_text():
        assert time.monotonic() < deadline, "the reader never slept in its wait"
        time.sleep(0.001)
    # pure Python work progresses while the other thread is blocked in Rust
    counter = 0
    for _ in range(200_000):
        counter += 1
    assert counter == 200_000
    assert t.is_alive() and "data" not in result
    w.push_chunk(np.ones((4, 2)))
    t.join()
    np.testing.assert_array_equal(result["data"], np.ones((4, 2)))


@pytest.mark.slow
def test_many_chunks_across_processes(stream_name: str, child) -> None:
    s = Stream.create(stream_name, n_channels=8, dtype="int32", capacity=4096)
    r = s.reader("lossless")
    n = 2_000_000
    c = child(WRITER, stream_name, str(n), "1000")
    total = 0
    while total < n:
        data, _ = r.pull_chunk(max_samples=10_000, timeout=None)
        if len(data):
            np.testing.assert_array_equal(data[:, 0], np.arange(total, total + len(data)) * 10)
        total += len(data)
    assert c.finish()[0] == 0
