"""`rtloop view` in a real browser: headless Chromium (Debian's package) driven by Playwright.

The page must list a stream a test creates (and drop it when removed) without a reload, draw
the scope's trace of a known waveform exactly (min/max per column, computed by the server),
show events at their samples, and show a killed writer as dead. The commit-to-screen latency
the page measures is read back; its target is judged in bench/view.py, not here.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import numpy as np
import pytest

import rtloop

from conftest import terminate

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# as the machine's closed network needs: no background connections, no sandbox as root
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
RATE = 1000.0
FREQ = 5.0


def wave(k: int, ch: int) -> float:
    """The known waveform: channel ch at sample k (a 5 Hz sine of amplitude ch+1, plus ch)."""
    return float(rtloop_f32((ch + 1) * math.sin(2 * math.pi * FREQ * k / RATE) + ch))


def rtloop_f32(x: float) -> float:
    import numpy as np

    return float(np.float32(x))


WRITER = r"""
import math, sys, time
import numpy as np, rtloop
name, rate, freq, event_at = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
s = rtloop.Stream.create(name, n_channels=4, dtype="float32", sfreq=rate, capacity=100_000,
                         ch_names=["Fz", "Cz", "Pz", "Oz"], ch_units=["uV"] * 4)
w = s.writer()
print("ready", flush=True)
k, chunk, t0 = 0, 10, time.monotonic()
while True:
    idx = np.arange(k, k + chunk)[:, None]
    ch = np.arange(4)[None, :]
    x = ((ch + 1) * np.sin(2 * np.pi * freq * idx / rate) + ch).astype(np.float32)
    w.push_chunk(x)
    if k <= event_at < k + chunk:
        w.push_event("stim", "pulse-7", sample=event_at)
    k += chunk
    time.sleep(max(0.0, t0 + k / rate - time.monotonic()))
"""


class Viewer:
    """`rtloop view --port 0` in its own process."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rtloop", "view", "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("rtloop view: open "):
            self.stop()
            raise AssertionError(f"rtloop view did not start: {line!r}")
        self.url = line.split("open ", 1)[1].strip()

    def stop(self) -> str:
        return terminate(self.proc)


@pytest.fixture
def viewer() -> Iterator[Viewer]:
    v = Viewer()
    yield v
    v.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = ctx.new_page()
    errors: List[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    ctx.close()
    assert not errors, f"the page threw: {errors}"


def row(page: Any, name: str) -> Any:
    return page.locator(f'#streams tbody tr[data-name="{name}"]')


def shots_dir() -> Path:
    d = os.environ.get("RTLOOP_VIEW_SHOTS")
    return Path(d) if d else Path()


def test_the_page_lists_streams_as_they_come_and_go(viewer: Viewer, page: Any, make_name: Callable[[], str]) -> None:
    page.goto(viewer.url)
    page.wait_for_selector("#no-streams, #streams tbody tr", state="attached")
    name = make_name()
    s = rtloop.Stream.create(name, n_channels=8, dtype="int16", sfreq=30000.0, capacity=30000)
    w = s.writer()
    w.push_chunk(np.ones((100, 8), dtype=np.int16))
    # no reload: the list refreshes itself
    r = row(page, name)
    r.wait_for(timeout=10_000)
    cells = r.locator("td").all_inner_texts()
    assert cells[:4] == [name, "int16", "8", "30 kHz"], cells
    assert r.get_attribute("data-writer") == "alive"
    w.close()
    page.wait_for_function(
        "n => document.querySelector(`#streams tbody tr[data-name='${n}']`)?.dataset.writer === 'closed'", arg=name, timeout=10_000)
    rtloop.Stream.remove(name)
    r.wait_for(state="detached", timeout=10_000)


def test_the_scope_draws_a_known_waveform_and_its_events(
    viewer: Viewer, page: Any, make_name: Callable[[], str], child: Callable[..., Any]
) -> None:
    name = make_name()
    writer = child(WRITER, name, str(RATE), str(FREQ), "1500")
    writer.expect("ready")
    page.goto(f"{viewer.url}{'&' if '?' in viewer.url else '?'}stream={name}")
    # two seconds of signal, then freeze what is on screen
    page.wait_for_function("() => window.rtloopView.ring && window.rtloopView.ring.written >= 2500", timeout=20_000)
    page.click("#pause")
    page.wait_for_function("() => window.rtloopView.paused")
    time.sleep(0.2)  # a frame already asked for may still land
    ring: Dict[str, Any] = page.evaluate("""() => { const r = window.rtloopView.ring;
        return { cols: r.cols, nch: r.nch, spc: r.spc, written: r.written, lastBin: r.lastBin,
                 bins: Array.from(r.bins), minmax: Array.from(r.minmax), names: r.names, units: r.units }; }""")
    assert ring["names"] == ["Fz", "Cz", "Pz", "Oz"] and ring["units"] == ["uV"] * 4
    # 2 s over the canvas width: samples per column as the server chose them
    spc, nch, written = ring["spc"], ring["nch"], int(ring["written"])
    assert spc == math.ceil(2 * RATE / ring["cols"])
    checked = 0
    for slot, b in enumerate(ring["bins"]):
        b = int(b)
        if b < 0 or ring["lastBin"] - b >= ring["cols"]:
            continue
        first, end = b * spc, min((b + 1) * spc, written)
        if first < written - ring["cols"] * spc or end <= first:
            continue
        for c in range(nch):
            vals = [wave(k, c) for k in range(first, end)]
            got = ring["minmax"][(slot * nch + c) * 2:(slot * nch + c) * 2 + 2]
            assert got == pytest.approx([min(vals), max(vals)], abs=1e-5), (b, c, got)
        checked += 1
    assert checked >= ring["cols"] * 0.9, f"only {checked} of {ring['cols']} columns were on screen"
    # the event at sample 1500, in the list and in the page's markers
    page.wait_for_selector("#events .event", timeout=10_000)
    assert "sample 1500 stim pulse-7" in page.inner_text("#events")
    events = page.evaluate("() => window.rtloopView.events")
    assert {"sample": 1500, "kind": "stim", "value": "pulse-7"} in events
    # the page measured commit-to-screen latency of every frame with new samples
    lat = page.evaluate("() => window.rtloopView.latencies")
    assert len(lat) > 10 and all(0 <= x < 60_000 for x in lat), lat[:20]
    if os.environ.get("RTLOOP_VIEW_SHOTS"):
        page.screenshot(path=str(shots_dir() / "view-scope.png"))
    # the histogram of a channel: the sine's values on a linear axis (it crosses zero)
    page.click("#pause")  # resume
    page.click("#mode-hist")
    page.wait_for_function("() => window.rtloopView.histogram && window.rtloopView.histogram.n > 100", timeout=10_000)
    h = page.evaluate("() => window.rtloopView.histogram")
    assert not h["log"] and h["min"] == pytest.approx(-1.0, abs=0.01) and h["max"] == pytest.approx(1.0, abs=0.01)


def test_a_killed_writer_is_shown_as_dead(viewer: Viewer, page: Any, make_name: Callable[[], str], child: Callable[..., Any]) -> None:
    name = make_name()
    writer = child(WRITER, name, str(RATE), str(FREQ), "-1")
    writer.expect("ready")
    page.goto(viewer.url)
    r = row(page, name)
    r.wait_for(timeout=10_000)
    page.wait_for_function(
        "n => document.querySelector(`#streams tbody tr[data-name='${n}']`)?.dataset.writer === 'alive'", arg=name, timeout=10_000)
    writer.proc.send_signal(signal.SIGKILL)
    writer.proc.wait()
    page.wait_for_function(
        "n => document.querySelector(`#streams tbody tr[data-name='${n}']`)?.dataset.writer === 'dead'", arg=name, timeout=10_000)
    assert r.locator("td").nth(4).inner_text() == f"DEAD (pid {writer.pid})"
    assert "writer-dead" in (r.locator("td").nth(4).get_attribute("class") or "")
    if os.environ.get("RTLOOP_VIEW_SHOTS"):
        page.screenshot(path=str(shots_dir() / "view-streams.png"))


def test_a_viewer_shown_to_other_machines_asks_for_its_token(make_name: Callable[[], str]) -> None:
    v = Viewer("--bind", "0.0.0.0")
    try:
        assert "?token=" in v.url
        token = v.url.split("?token=", 1)[1]
        base = v.url.split("?", 1)[0]
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + "api/streams", timeout=5)
        assert e.value.code == 403
        assert "access token" in e.value.read().decode()
        with urllib.request.urlopen(f"{base}api/streams?token={token}", timeout=5) as r:
            assert r.status == 200
    finally:
        v.stop()


def test_bad_options_are_refused_with_what_is_allowed() -> None:
    out = subprocess.run([sys.executable, "-m", "rtloop", "view", "--token", "short"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "--token must be at least 16 characters from A-Z a-z 0-9 - _" in out.stderr
    out = subprocess.run([sys.executable, "-m", "rtloop", "view", "--bind", "nowhere"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "invalid value 'nowhere' for '--bind <BIND>'" in out.stderr


def test_the_lab_publishes_its_latency_and_percent_used_live_and_the_page_shows_them(
    viewer: Viewer, page: Any
) -> None:
    prefix = f"labview-{os.getpid()}"
    lab = subprocess.Popen(
        [sys.executable, "-m", "rtloop", "--json", "lab", "loadtest", "--seconds", "6", "--warmup", "0.5",
         "--no-reference", "--publish", prefix],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        page.goto(viewer.url)
        row(page, f"{prefix}.latency").wait_for(timeout=30_000)
        row(page, f"{prefix}.percent_used").wait_for(timeout=10_000)
        page.goto(f"{viewer.url}?stream={prefix}.latency")
        page.wait_for_function("() => window.rtloopView.reset", timeout=10_000)
        page.click("#mode-hist")
        page.wait_for_function("() => window.rtloopView.histogram && window.rtloopView.histogram.n > 50", timeout=20_000)
        h = page.evaluate("() => window.rtloopView.histogram")
        # loopback latencies: positive, so on a log axis, in microseconds
        assert h["log"] and 0 < h["min"] <= h["p50"] <= h["p99"] <= h["max"]
        if os.environ.get("RTLOOP_VIEW_SHOTS"):
            page.screenshot(path=str(shots_dir() / "view-lab-histogram.png"))
        pct = rtloop.Stream.open(f"{prefix}.percent_used")
        assert pct.ch_names == ["percent_used"] and pct.ch_units == ["%"] and pct.written > 0
        out, err = lab.communicate(timeout=60)
        assert lab.returncode == 0, err
        assert f"live: streams {prefix}.latency and {prefix}.percent_used" in err
        report = json.loads(out)
        assert report["host"]["latency"]["count"] > 0
    finally:
        if lab.poll() is None:
            lab.kill()
            lab.communicate()
    # the run removes its live streams when it ends
    assert not [n for n in rtloop.Stream.list() if n.startswith(prefix)]


def test_channel_pages_show_their_own_channels_and_the_viewer_takes_no_reader_slot(
    viewer: Viewer, page: Any, make_name: Callable[[], str]
) -> None:
    name = make_name()
    names = [f"e{i:02d}" for i in range(10)]
    s = rtloop.Stream.create(name, n_channels=10, dtype="int16", sfreq=1000.0, capacity=10_000, ch_names=names)
    w = s.writer()
    # channel c holds the constant c * 100: each page's minima and maxima say which channels it shows
    w.push_chunk(np.tile(np.arange(10, dtype=np.int16) * 100, (500, 1)))
    page.goto(f"{viewer.url}?stream={name}")
    page.wait_for_function("() => window.rtloopView.ring && window.rtloopView.ring.lastBin >= 0", timeout=10_000)
    page.select_option("#per-page", "4")
    for first, shown in ((0, 4), (4, 4), (8, 2)):
        page.wait_for_function(
            "f => { const r = window.rtloopView.reset; return r && r.config.first_channel === f && window.rtloopView.ring.lastBin >= 0; }",
            arg=first, timeout=10_000)
        r = page.evaluate("() => { const r = window.rtloopView.ring; const s = r.lastBin % r.cols; "
                          "return { names: r.names, mm: Array.from(r.minmax.subarray(s * r.nch * 2, (s + 1) * r.nch * 2)) }; }")
        assert r["names"] == names[first:first + shown]
        assert r["mm"] == [v for c in range(first, first + shown) for v in (c * 100, c * 100)]
        assert page.inner_text("#page-label") == f"{first}–{first + shown - 1} of 10"
        if first < 8:
            page.click("#page-next")
    assert page.is_disabled("#page-next")
    # the page read the stream all along without registering a reader
    assert row(page, name).locator("td").nth(5).inner_text() == "0"
    w.close()
