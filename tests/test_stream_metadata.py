"""Stream metadata (LSL's StreamInfo: content type, source id, channel names, units and
types, a free-form description) and discovery with `rtloop.resolve_streams`, across real
processes and the command line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Callable

import numpy as np
import pytest

import rtloop


def test_metadata_given_at_creation_is_what_every_opener_sees(make_name: Callable[[], str]) -> None:
    name = make_name()
    s = rtloop.Stream.create(
        name,
        n_channels=3,
        sfreq=250.0,
        content_type="EEG",
        source_id="amp-0042",
        ch_names=["Fz", "Cz", "STI"],
        ch_units=["uV", "uV", ""],
        ch_types=["eeg", "eeg", "stim"],
        desc={"amplifier": {"model": "X-32", "gain": 24}, "montage": "10-20"},
    )
    # another process opens it by name and sees every field
    code = """
        import json, sys, rtloop
        i = rtloop.Stream.open(sys.argv[1]).info
        print(json.dumps([i.content_type, i.source_id, i.ch_names, i.ch_units, i.ch_types, i.desc]))
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), name],
        capture_output=True, text=True, check=True,
    ).stdout
    assert json.loads(out) == [
        "EEG",
        "amp-0042",
        ["Fz", "Cz", "STI"],
        ["uV", "uV", ""],
        ["eeg", "eeg", "stim"],
        {"amplifier": {"model": "X-32", "gain": 24}, "montage": "10-20"},
    ]
    info = s.info
    assert (info.name, info.n_channels, info.sfreq, info.dtype) == (name, 3, 250.0, "float32")
    assert info.writer == "none" and info.creator_pid > 0
    # one type for every channel
    s2 = rtloop.Stream.create(make_name(), n_channels=4, ch_types="seeg")
    assert s2.ch_types == ["seeg"] * 4
    # nothing given: empty, not invented
    s3 = rtloop.Stream.create(make_name(), n_channels=2)
    assert (s3.content_type, s3.source_id, s3.ch_types, s3.desc) == ("", "", [], {})


def test_resolve_streams_filters_by_name_type_and_source_id(make_name: Callable[[], str]) -> None:
    eeg, markers, other, unwritten = make_name(), make_name(), make_name(), make_name()
    made = [
        rtloop.Stream.create(eeg, n_channels=2, content_type="EEG", source_id=f"src-{eeg}"),
        rtloop.Stream.create(markers, n_channels=1, content_type="Markers", source_id=f"src-{eeg}"),
        rtloop.Stream.create(other, n_channels=1, content_type="EEG", source_id="elsewhere"),
    ]
    writers = [s.writer() for s in made]  # live: resolve finds live streams, as pylsl does
    rtloop.Stream.create(unwritten, n_channels=2, content_type="EEG", source_id=f"src-{eeg}")
    assert unwritten not in {i.name for i in rtloop.resolve_streams()}, "no writer yet: not live"
    mine = {eeg, markers, other}
    listed = [i.name for i in rtloop.resolve_streams() if i.name in mine]
    assert listed == sorted(mine)
    assert {i.name for i in rtloop.resolve_streams(type="EEG")} >= {eeg, other}
    assert markers not in {i.name for i in rtloop.resolve_streams(type="EEG")}
    assert [i.name for i in rtloop.resolve_streams(source_id=f"src-{eeg}")] == sorted([eeg, markers])
    assert [i.name for i in rtloop.resolve_streams(name=markers)] == [markers]
    assert rtloop.resolve_streams(name=make_name()) == []
    # an info opens its stream
    s = rtloop.resolve_streams(name=eeg)[0].open()
    assert s.name == eeg and s.content_type == "EEG"
    for w in writers:
        w.close()


def test_resolve_streams_waits_for_a_stream_another_process_creates(make_name: Callable[[], str]) -> None:
    name = make_name()
    code = """
        import sys, time, rtloop
        sys.stdin.readline()   # the test looked and found nothing: now create it, a bit later
        time.sleep(0.5)
        s = rtloop.Stream.create(sys.argv[1], n_channels=8, sfreq=1000.0, content_type="EEG",
                                 source_id="late-amp")
        w = s.writer()
        w.push_chunk(__import__("numpy").zeros((10, 8), "float32"))
        sys.stdin.readline()   # keep the writer until the test is done
    """
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), name], stdin=subprocess.PIPE, text=True
    )
    try:
        # nothing there yet: an immediate look finds nothing, a wait finds it (the child
        # creates it only when told, not after a sleep that a loaded machine may outlast)
        assert rtloop.resolve_streams(source_id="late-amp", timeout=0) == []
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        found = rtloop.resolve_streams(source_id="late-amp", minimum=1, timeout=30)
        assert [i.name for i in found] == [name]
        assert found[0].n_channels == 8
        # a timeout that runs out returns what matched so far (pylsl's behaviour)
        assert rtloop.resolve_streams(type="no-such-type", minimum=1, timeout=0.2) == []
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(30)


def test_files_that_are_not_streams_are_skipped(make_name: Callable[[], str]) -> None:
    name = make_name()
    path = rtloop.Stream.create(name, n_channels=1).path
    rtloop.Stream.remove(name)
    junk = make_name()
    with open(path.replace(name, junk), "wb") as f:
        f.write(b"not a stream" * 1000)
    try:
        assert junk not in {i.name for i in rtloop.resolve_streams()}
    finally:
        import os

        os.unlink(path.replace(name, junk))


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"ch_types": ["eeg"] * 2}, ValueError, "2 channel types given for 3 channels; give one per channel or none"),
        ({"ch_types": ["x" * 32] * 3}, ValueError, "at most 31 bytes of UTF-8 without NUL or newline"),
        ({"ch_types": ["a\nb"] * 3}, ValueError, "without NUL or newline"),
        ({"content_type": "E" * 32}, ValueError, 'content type "EEEE'),
        ({"source_id": "s" * 64}, ValueError, "at most 63 bytes"),
        ({"source_id": "a\0b"}, ValueError, "without NUL"),
        ({"desc": {"notes": "n" * 4000}}, ValueError, "at most 3776 bytes together"),
        ({"desc": {"f": np.float32(1)}}, TypeError, "must be a JSON-serialisable dict"),
        ({"desc": "text"}, TypeError, "The 'desc' parameter must be an instance of 'dict'"),
        ({"content_type": 3}, TypeError, "The 'content_type' parameter must be an instance of 'str'"),
        ({"ch_types": [1, 2, 3]}, TypeError, "The 'ch_types' parameter must be an instance of 'str'"),
    ],
)
def test_bad_metadata_is_refused_and_nothing_is_created(
    make_name: Callable[[], str], kwargs: dict, error: type, message: str
) -> None:
    name = make_name()
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        rtloop.Stream.create(name, n_channels=3, **kwargs)
    assert name not in rtloop.Stream.list()


def test_a_description_written_by_another_tool_comes_back_as_text(make_name: Callable[[], str]) -> None:
    name = make_name()
    subprocess.run(
        [sys.executable, "-m", "rtloop", "stream", "create", name, "--channels", "2",
         "--type", "EEG", "--source-id", "cli-amp", "--ch-types", "eeg",
         "--desc", "subject 7, session 2"],
        check=True, capture_output=True,
    )
    s = rtloop.Stream.open(name)
    assert (s.content_type, s.source_id, s.ch_types) == ("EEG", "cli-amp", ["eeg", "eeg"])
    assert s.desc == {"text": "subject 7, session 2"}
    info = json.loads(
        subprocess.run(
            [sys.executable, "-m", "rtloop", "--json", "stream", "info", name],
            check=True, capture_output=True, text=True,
        ).stdout
    )
    assert (info["content_type"], info["source_id"], info["description"]) == (
        "EEG", "cli-amp", "subject 7, session 2",
    )
