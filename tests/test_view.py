"""`rtloop view` in a real browser: headless Chromium (Debian's package) driven by Playwright.

The page must list a stream a test creates (and drop it when removed) without a reload, draw
the scope's trace of a known waveform exactly (min/max per column, computed by the server),
show events at their samples, and show a killed writer as dead. The commit-to-screen latency
the page measures is read back; its target is judged in bench/view.py, not here.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import shutil
import signal
import socket
import struct
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

    def __init__(self, *args: str, env: Dict[str, str] | None = None,
                 preexec_fn: Callable[[], None] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rtloop", "view", "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **(env or {})}, preexec_fn=preexec_fn,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("rtloop view: open "):
            err = self.stop()
            raise AssertionError(f"rtloop view did not start: {line!r} {err}")
        self.url = line.split("open ", 1)[1].strip()
        base, _, query = self.url.partition("?")
        self.base = base
        self.token = query.split("token=", 1)[1] if "token=" in query else ""
        self.port = int(base.rsplit(":", 1)[1].rstrip("/"))

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
    # a clean close ends the stream: its name goes, and so does its row
    w.close()
    r.wait_for(state="detached", timeout=10_000)
    # a stream waiting for its writer is listed until it is removed
    other = make_name()
    rtloop.Stream.create(other, n_channels=1, dtype="float32", sfreq=100.0, capacity=1000)
    r = row(page, other)
    r.wait_for(timeout=10_000)
    assert r.get_attribute("data-writer") == "none"
    rtloop.Stream.remove(other)
    r.wait_for(state="detached", timeout=10_000)


def test_the_scope_draws_a_known_waveform_and_its_events(
    viewer: Viewer, page: Any, make_name: Callable[[], str], child: Callable[..., Any]
) -> None:
    name = make_name()
    writer = child(WRITER, name, str(RATE), str(FREQ), "1500")
    writer.expect("ready")
    page.goto(f"{viewer.url}&stream={name}")
    # two seconds of signal, then freeze what is on screen
    page.wait_for_function("() => window.rtloopView.ring && window.rtloopView.ring.written >= 2500", timeout=20_000)
    # the event at sample 1500 is listed before the pause: a paused page asks for no frames,
    # so an event that a loaded machine had not yet brought would never come
    page.wait_for_selector("#events .event", timeout=20_000)
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
    assert "sample 1500 stim pulse-7" in page.inner_text("#events")
    events = page.evaluate("() => window.rtloopView.events")
    assert {"index": 0, "sample": 1500, "kind": "stim", "value": "pulse-7"} in events
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
        assert e.value.code == 401
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
        page.goto(f"{viewer.url}&stream={prefix}.latency")
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
    page.goto(f"{viewer.url}&stream={name}")
    page.wait_for_function("() => window.rtloopView.ring && window.rtloopView.ring.lastBin >= 0", timeout=10_000)
    page.select_option("#per-page", "4")
    for first, shown in ((0, 4), (4, 4), (8, 2)):
        # this page's reset, not the one before it (the first page also starts at channel 0)
        page.wait_for_function(
            "([f, n]) => { const r = window.rtloopView.reset; return r && r.config.first_channel === f "
            "&& r.config.n_channels === n && window.rtloopView.ring.lastBin >= 0; }",
            arg=[first, shown], timeout=10_000)
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


# ---------------------------------------------------------------- access, sizes, connections
# Real requests on real sockets, written out byte by byte: the refusals are about headers
# (Host, Origin) that ordinary clients set for themselves.


def http(port: int, path: str, host: str | None = None, origin: str | None = None,
         upgrade: bool = False, timeout: float = 10.0) -> tuple[int, str]:
    """One request on a fresh connection: (status, body or the 101's headers)."""
    lines = [f"GET {path} HTTP/1.1", f"Host: {host or f'127.0.0.1:{port}'}"]
    if origin is not None:
        lines.append(f"Origin: {origin}")
    if upgrade:
        lines += ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
                  f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}"]
    else:
        lines.append("Connection: close")
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if status == 101:
            return status, head.decode()
        length = re.search(rb"(?i)content-length: *(\d+)", head)
        while length and len(body) < int(length.group(1)):
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
        return status, body.decode(errors="replace")


class Ws:
    """A WebSocket client written out (RFC 6455), so a test can send what a browser would
    not: frames longer than allowed, any Origin."""

    def __init__(self, port: int, path: str, origin: str | None = None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        key = base64.b64encode(os.urandom(16)).decode()
        req = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
               + (f"Origin: {origin}\r\n" if origin else "") + "\r\n")
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            assert chunk, f"closed during the handshake: {head!r}"
            head += chunk
        assert head.startswith(b"HTTP/1.1 101"), head

    def send(self, payload: bytes, opcode: int = 1) -> None:
        n = len(payload)
        hdr = bytes([0x80 | opcode])
        if n < 126:
            hdr += bytes([0x80 | n])
        elif n < 65536:
            hdr += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            hdr += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        body = (np.frombuffer(payload, np.uint8) ^ np.resize(np.frombuffer(mask, np.uint8), n)).tobytes()
        self.sock.sendall(hdr + mask + body)

    def _exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise EOFError("the viewer closed the connection")
            out += chunk
        return out

    def recv(self) -> tuple[int, bytes]:
        """The next (opcode, payload); close frames included."""
        b0, b1 = self._exact(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", self._exact(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self._exact(8))[0]
        return b0 & 0x0F, self._exact(n)

    def recv_text(self) -> Dict[str, Any]:
        while True:
            op, data = self.recv()
            if op == 1:
                return json.loads(data)
            assert op != 8, f"closed: {data!r}"

    def close(self) -> None:
        self.sock.close()


def vm_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def test_a_loopback_viewer_asks_every_request_for_its_token(viewer: Viewer) -> None:
    # the default address too: another user's process, or a web page in the browser, is on
    # the same machine
    assert viewer.url.startswith(f"http://127.0.0.1:{viewer.port}/?token=")
    assert len(viewer.token) >= 32
    p, tok = viewer.port, viewer.token
    for path in ("/", "/api/streams", "/api/streams/x", "/api/streams/x/histogram"):
        status, body = http(p, path)
        assert status == 401 and "access token" in body, (path, status, body)
        status, body = http(p, f"{path}?token=not-the-token-at-all")
        assert status == 403 and "wrong access token" in body, (path, status, body)
    # the WebSocket upgrade too
    assert http(p, "/ws/scope?stream=x", upgrade=True)[0] == 401
    assert http(p, "/ws/scope?stream=x&token=not-the-token-at-all", upgrade=True)[0] == 403
    # with the token: the data, and the upgrade from the page's own origin (or no browser)
    status, body = http(p, f"/api/streams?token={tok}")
    assert status == 200 and isinstance(json.loads(body), list)
    assert http(p, f"/?token={tok}")[0] == 200
    assert http(p, f"/ws/scope?stream=x&token={tok}", upgrade=True,
                origin=f"http://127.0.0.1:{p}")[0] == 101
    assert http(p, f"/ws/scope?stream=x&token={tok}", upgrade=True)[0] == 101
    assert http(p, f"/api/streams?token={tok}", host=f"localhost:{p}")[0] == 200
    # the script holds no data
    assert http(p, "/app.js")[0] == 200


def test_a_foreign_origin_or_host_is_refused_even_with_the_token(viewer: Viewer) -> None:
    p, tok = viewer.port, viewer.token
    # another site's page opening a WebSocket (browsers send their page's origin)
    for origin in ("http://evil.example", f"http://evil.example:{p}", "null",
                   f"https://127.0.0.1:{p}", f"http://127.0.0.1:{p + 1}"):
        status, body = http(p, f"/ws/scope?stream=x&token={tok}", upgrade=True, origin=origin)
        assert status == 403 and "own page" in body, (origin, status, body)
    # DNS rebinding: a name that resolves to 127.0.0.1 but is not this viewer's
    for host in (f"evil.example:{p}", "evil.example", f"127.0.0.1:{p + 1}", f"127.0.0.1.evil.example:{p}"):
        for path in ("/", f"/api/streams?token={tok}"):
            status, body = http(p, path, host=host)
            assert status == 403 and "Host" in body, (host, path, status, body)
        assert http(p, f"/ws/scope?stream=x&token={tok}", upgrade=True, host=host,
                    origin=f"http://{host}")[0] == 403


def test_the_token_can_be_set(make_name: Callable[[], str]) -> None:
    token = "a-token-set-by-the-test-" + os.urandom(4).hex()
    v = Viewer(env={"RTLOOP_VIEW_TOKEN": token})
    try:
        assert v.url == f"http://127.0.0.1:{v.port}/?token={token}"
        assert http(v.port, f"/api/streams?token={token}")[0] == 200
        assert http(v.port, "/api/streams")[0] == 401
    finally:
        v.stop()


def test_a_message_longer_than_allowed_closes_the_scope_with_the_reason(
    viewer: Viewer, make_name: Callable[[], str]
) -> None:
    ws = Ws(viewer.port, f"/ws/scope?stream={make_name()}&token={viewer.token}")
    try:
        ws.send(b'{"type":"frame","pad":"' + b"A" * 100_000 + b'"}')
        op, data = ws.recv()
        assert op == 8, (op, data[:200])
        code = struct.unpack(">H", data[:2])[0]
        reason = data[2:].decode()
        assert code == 1009, (code, reason)
        assert "65536 bytes" in reason and "AAAA" not in reason, reason
    finally:
        ws.close()


def test_a_bad_request_is_answered_briefly_without_the_request(
    viewer: Viewer, make_name: Callable[[], str]
) -> None:
    ws = Ws(viewer.port, f"/ws/scope?stream={make_name()}&token={viewer.token}")
    try:
        junk = "Q" * 60_000  # under the limit, so it is read and answered
        for req in ('{"type":"config","window_s":"' + junk + '"}', '{"type":"' + junk + '"}',
                    "[" + junk, '{"pad":"' + junk + '","type":"frame"'):
            ws.send(req.encode())
            msg = ws.recv_text()
            assert msg["type"] == "error"
            text = msg["message"]
            assert len(text) < 400 and "Q" * 50 not in text, text[:300]
            assert text.startswith("bad request, ") and '{"type":"frame"}' in text, text
        ws.send(b'{"type":"nope"}')
        text = ws.recv_text()["message"]
        assert "unknown variant `nope`, expected `config` or `frame`" in text, text
        # the connection still serves good requests
        ws.send(b'{"type":"frame"}')
        assert ws.recv_text()["message"] == "send a config before asking for frames"
    finally:
        ws.close()


def test_big_messages_from_many_clients_leave_the_viewer_small(make_name: Callable[[], str]) -> None:
    v = Viewer()
    try:
        path = f"/ws/scope?stream={make_name()}&token={v.token}"
        warm = Ws(v.port, path)
        warm.send(b'{"type":"nope"}')
        warm.recv_text()
        warm.close()
        time.sleep(0.2)
        rss0, hwm0 = vm_kib(v.proc.pid, "VmRSS"), vm_kib(v.proc.pid, "VmHWM")

        def flood(_: int) -> None:
            ws = Ws(v.port, path)
            try:
                # one 12 MiB text frame of a bad request: within what the old viewer took
                ws.send(b'{"type":"' + b"Z" * (12 << 20) + b'"}')
                ws.recv()
            except (OSError, EOFError):
                pass  # refused from its header: the viewer closed while it was sent
            finally:
                ws.close()

        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            list(ex.map(flood, range(8)))
        time.sleep(0.5)
        rss1, hwm1 = vm_kib(v.proc.pid, "VmRSS"), vm_kib(v.proc.pid, "VmHWM")
        # 8 clients sent 96 MiB; the viewer read none of it into memory, at its peak or after
        assert hwm1 - hwm0 < 24 * 1024, (hwm0, hwm1)
        assert rss1 - rss0 < 16 * 1024, (rss0, rss1)
        assert http(v.port, f"/api/streams?token={v.token}")[0] == 200
    finally:
        v.stop()


def _closed(s: socket.socket) -> bool:
    """The viewer closed this connection (EOF, or reset after unread bytes)."""
    s.setblocking(False)
    try:
        while s.recv(65536):
            pass  # an answer before the close (a 408) is read past
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_slow_and_silent_connections_are_closed_after_the_header_timeout() -> None:
    v = Viewer(env={"RTLOOP_VIEW_HEADER_TIMEOUT": "0.5"})
    socks: List[socket.socket] = []
    try:
        dribblers = [socket.create_connection(("127.0.0.1", v.port), timeout=5) for _ in range(20)]
        silent = [socket.create_connection(("127.0.0.1", v.port), timeout=5) for _ in range(5)]
        socks = dribblers + silent
        # a keep-alive connection that got its answer is idle too
        kept = socket.create_connection(("127.0.0.1", v.port), timeout=5)
        socks.append(kept)
        kept.sendall(f"GET /api/streams?token={v.token} HTTP/1.1\r\nHost: 127.0.0.1:{v.port}\r\n\r\n".encode())
        assert kept.recv(65536).startswith(b"HTTP/1.1 200")
        header = f"GET /api/streams?token={v.token} HTTP/1.1\r\nHost: 127.0.0.1:{v.port}\r\nX-Pad: ".encode()
        sent = 0
        deadline = time.monotonic() + 30
        # one header byte every 0.1 s: each byte arrives well within any read timeout
        while time.monotonic() < deadline and not all(_closed(s) for s in socks):
            for s in dribblers:
                try:
                    s.send(header[sent % len(header):][:1] if sent < len(header) else b"a")
                except OSError:
                    pass
            sent += 1
            time.sleep(0.1)
        open_ = [i for i, s in enumerate(socks) if not _closed(s)]
        assert not open_, f"still open after {sent * 0.1:.1f} s: {open_}"
        # and a client that sends its request at once is served
        assert http(v.port, f"/api/streams?token={v.token}")[0] == 200
    finally:
        for s in socks:
            s.close()
        v.stop()


def test_idle_connections_at_the_limit_make_room_for_a_new_client() -> None:
    import resource

    def few_files() -> None:
        # as `ulimit -n 64`: the old viewer ran out of files and stopped accepting
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))

    # a long header timeout: room is made by closing the idle ones, not by the timeout
    v = Viewer(env={"RTLOOP_VIEW_HEADER_TIMEOUT": "600"}, preexec_fn=few_files)
    idle: List[socket.socket] = []
    try:
        for _ in range(100):
            idle.append(socket.create_connection(("127.0.0.1", v.port), timeout=5))
        time.sleep(0.5)
        status, body = http(v.port, f"/api/streams?token={v.token}", timeout=20)
        assert status == 200 and isinstance(json.loads(body), list)
        # the oldest idle ones were closed to make room; the newest are still open
        closed = [i for i, s in enumerate(idle) if _closed(s)]
        assert len(closed) >= 60 and closed == list(range(len(closed))), closed
        assert not _closed(idle[-1])
        # a scope's WebSocket is not idle: it survives another wave of idle connections
        ws = Ws(v.port, f"/ws/scope?stream=none-{os.getpid()}&token={v.token}")
        more = [socket.create_connection(("127.0.0.1", v.port), timeout=5) for _ in range(100)]
        idle += more
        time.sleep(0.5)
        ws.send(b'{"type":"frame"}')
        assert ws.recv_text()["message"] == "send a config before asking for frames"
        ws.close()
    finally:
        for s in idle:
            s.close()
        err = v.stop()
    assert "the one idle longest" in err


def test_max_connections_is_kept_and_scopes_are_never_closed_to_make_room() -> None:
    v = Viewer("--max-connections", "3")
    idle: List[socket.socket] = []
    scopes: List[Ws] = []
    try:
        idle = [socket.create_connection(("127.0.0.1", v.port), timeout=5) for _ in range(10)]
        # the tenth took the place of the seventh: the three newest are open
        status, _ = http(v.port, f"/api/streams?token={v.token}")
        assert status == 200
        assert [_closed(s) for s in idle] == [True] * 8 + [False] * 2
        # three scopes fill the viewer: idle connections make room for them, scopes do not
        scopes = [Ws(v.port, f"/ws/scope?stream=none-{os.getpid()}&token={v.token}") for _ in range(3)]
        assert all(_closed(s) for s in idle)
        status, body = http(v.port, f"/api/streams?token={v.token}")
        assert status == 503 and "3 connections open" in body and "--max-connections" in body, body
        for ws in scopes:
            ws.send(b'{"type":"frame"}')
            assert ws.recv_text()["message"] == "send a config before asking for frames"
        # a scope that ends gives its place back
        scopes.pop().close()
        deadline = time.monotonic() + 20
        while http(v.port, f"/api/streams?token={v.token}")[0] != 200:
            assert time.monotonic() < deadline, "the closed scope's place was not given back"
            time.sleep(0.05)
    finally:
        for s in idle:
            s.close()
        for ws in scopes:
            ws.close()
        v.stop()
# a writer of constant rows (channel c holds value + c) that a test closes, kills or replaces;
# "close" on stdin closes it cleanly, "event SAMPLE" pushes an event at that sample
CONTROLLED = r"""
import sys, threading, time
import numpy as np, rtloop
name, value, rate = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
s = rtloop.Stream.create(name, n_channels=4, dtype="float32", sfreq=rate, capacity=100_000,
                         ch_names=["a", "b", "c", "d"], ch_units=["uV"] * 4)
w = s.writer()
stop = threading.Event()
lock = threading.Lock()
def control():
    for line in sys.stdin:
        cmd = line.split()
        if cmd and cmd[0] == "close":
            stop.set()
            with lock:
                w.close()
            print("closed", flush=True)
threading.Thread(target=control, daemon=True).start()
print("ready", flush=True)
row = (value + np.arange(4, dtype=np.float32))[None, :]
k, t0 = 0, time.monotonic()
while not stop.is_set():
    with lock:
        if stop.is_set():
            break
        w.push_chunk(np.repeat(row, 10, axis=0))
    k += 10
    time.sleep(max(0.0, t0 + k / rate - time.monotonic()))
time.sleep(3600)
"""


def scope_url(viewer: Viewer, name: str) -> str:
    return f"{viewer.url}{'&' if '?' in viewer.url else '?'}stream={name}"


def newest_values(page: Any) -> List[float]:
    """The minima and maxima of the newest column the page holds, channel by channel."""
    return page.evaluate("""() => { const r = window.rtloopView.ring; if (!r || r.lastBin < 0) return [];
        const s = r.lastBin % r.cols; return Array.from(r.minmax.subarray(s * r.nch * 2, (s + 1) * r.nch * 2)); }""")


def darkest(page: Any) -> int:
    """The darkest grey level of the trace as the screen shows it (0 black, 255 white), in the
    middle of the scope, away from the labels, scales and time axis drawn over it."""
    import io

    from PIL import Image

    img = Image.open(io.BytesIO(page.locator("#scope").screenshot())).convert("L")
    w, h = img.size
    return int(img.crop((w // 4, 20, 3 * w // 4, h - 40)).getextrema()[0])


@pytest.mark.parametrize("end", ["closed", "killed", "removed"])
def test_an_ended_stream_is_never_shown_as_live(
    viewer: Viewer, page: Any, make_name: Callable[[], str], child: Callable[..., Any], end: str
) -> None:
    name = make_name()
    writer = child(CONTROLLED, name, "5", str(RATE))
    writer.expect("ready")
    page.goto(scope_url(viewer, name))
    page.wait_for_function("() => window.rtloopView.frames > 10 && window.rtloopView.latencies.length > 3", timeout=20_000)
    assert page.is_hidden("#banner")
    assert "frames/s" in page.inner_text("#perf")
    # the trace has reached the middle of the scope, where the ink is measured
    live_ink, deadline = darkest(page), time.monotonic() + 20
    while live_ink >= 100 and time.monotonic() < deadline:
        time.sleep(0.2)
        live_ink = darkest(page)
    if end == "closed":
        writer.send("close")
        writer.expect("closed")
        want, state = "writer closed", "closed"
    elif end == "killed":
        writer.proc.send_signal(signal.SIGKILL)
        writer.proc.wait()
        want, state = f"writer died (pid {writer.pid})", "dead"
    else:
        rtloop.Stream.remove(name)
        want, state = "stream removed", "removed"
    page.wait_for_function("w => document.getElementById('banner').textContent.startsWith(w)", arg=want, timeout=10_000)
    assert page.is_visible("#banner")
    assert "ended" in (page.get_attribute("#scope-wrap", "class") or "")
    # frames go on (to notice a writer that makes the stream again), figures do not
    f0 = page.evaluate("() => window.rtloopView.frames")
    page.wait_for_function("f => window.rtloopView.frames >= f + 3", arg=f0, timeout=10_000)
    perf = page.inner_text("#perf")
    assert "frames/s" not in perf and "commit to screen" not in perf, perf
    assert page.evaluate("() => window.rtloopView.latencies.length") == 0
    # the trace is still there, dimmed: its darkest ink is lighter than it was
    assert live_ink < 100 and darkest(page) > live_ink + 80, (live_ink, darkest(page))
    # the list says the same of the stream
    r = row(page, name)
    page.wait_for_function(
        "([n, s]) => document.querySelector(`#streams tbody tr[data-name='${n}']`)?.dataset.writer === s",
        arg=[name, state], timeout=10_000)
    if end != "killed":  # a clean close or a removal takes the name: the row is the scope's
        assert r.get_attribute("data-ended") == "true"
    if os.environ.get("RTLOOP_VIEW_SHOTS") and end == "killed":
        page.screenshot(path=str(shots_dir() / "view-ended.png"))


def test_a_damaged_stream_shows_damaged_and_why_and_none_of_its_counters(
    viewer: Viewer, page: Any, make_name: Callable[[], str]
) -> None:
    """The outside finding: a damaged stream showed counters near 1e18 in the viewer."""
    from test_stream_lifecycle import damage_written_counter

    name = make_name()
    s = rtloop.Stream.create(name, n_channels=2, dtype="float32", sfreq=100.0)
    w = s.writer()
    w.push_chunk(np.ones((50, 2), np.float32))
    damage_written_counter(s, 987_654_321_987_654_321)
    page.goto(scope_url(viewer, name))
    page.wait_for_function(
        "() => document.getElementById('banner').textContent.startsWith('stream damaged: its sample counters')",
        timeout=20_000)
    assert "ended" in (page.get_attribute("#scope-wrap", "class") or "")
    # the page keeps asking (empty frames), and draws nothing of the damaged ring
    f0 = page.evaluate("() => window.rtloopView.frames")
    page.wait_for_function("f => window.rtloopView.frames >= f + 3", arg=f0, timeout=10_000)
    assert page.evaluate("() => window.rtloopView.ring.lastBin") == -1
    perf = page.inner_text("#perf")
    assert "frames/s" not in perf and "commit to screen" not in perf, perf
    r = row(page, name)
    r.wait_for(timeout=10_000)
    assert r.get_attribute("data-damaged") == "true"
    text = r.inner_text()
    assert "damaged: its sample counters cannot be right" in text
    # no counter cell: the count appears only inside the reason
    assert text.count("987654321987654321") == 1, text
    assert r.locator("td").count() == 5
    status, body = http(viewer.port, f"/api/streams/{name}?token={viewer.token}")
    detail = json.loads(body)
    assert status == 200 and detail["damage"].startswith("its sample counters")
    assert "written" not in detail and "percent_used" not in detail
    status, body = http(viewer.port, f"/api/streams/{name}/histogram?token={viewer.token}")
    assert status == 409 and "damaged" in body
    w.close()


@pytest.mark.parametrize("end", ["closed", "killed"])
def test_a_stream_made_again_under_its_name_is_followed(
    viewer: Viewer, page: Any, make_name: Callable[[], str], child: Callable[..., Any], end: str
) -> None:
    name = make_name()
    first = child(CONTROLLED, name, "10", str(RATE))
    first.expect("ready")
    page.goto(scope_url(viewer, name))
    page.wait_for_function("() => window.rtloopView.ring && window.rtloopView.ring.lastBin >= 0", timeout=20_000)
    assert newest_values(page) == [10, 10, 11, 11, 12, 12, 13, 13]
    old = page.evaluate("() => window.rtloopView.incarnation")
    if end == "closed":
        first.send("close")
        first.expect("closed")
    else:
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
    second = child(CONTROLLED, name, "20", str(RATE))
    second.expect("ready")
    # no reload: the scope shows the new stream's samples, live again
    page.wait_for_function("() => { const r = window.rtloopView.ring; return r.lastBin >= 0 && "
                           "r.minmax[(r.lastBin % r.cols) * r.nch * 2] === 20; }", timeout=10_000)
    assert newest_values(page) == [20, 20, 21, 21, 22, 22, 23, 23]
    page.wait_for_function("o => window.rtloopView.incarnation !== o && window.rtloopView.status.state === 'live'",
                           arg=old, timeout=10_000)
    assert page.is_hidden("#banner")
    assert "ended" not in (page.get_attribute("#scope-wrap", "class") or "")
    page.wait_for_function("() => window.rtloopView.latencies.length > 3", timeout=10_000)
    page.wait_for_function(
        "n => document.querySelector(`#streams tbody tr[data-name='${n}']`)?.dataset.writer === 'alive'", arg=name, timeout=10_000)


def test_events_are_listed_once_each_in_sample_order(
    viewer: Viewer, page: Any, make_name: Callable[[], str]
) -> None:
    name = make_name()
    s = rtloop.Stream.create(name, n_channels=10, dtype="float32", sfreq=1000.0, capacity=20_000)
    w = s.writer()
    w.push_chunk(np.zeros((1000, 10), dtype=np.float32))
    for i, at in enumerate((100, 300, 500, 700)):
        w.push_event("stim", f"e{i}", sample=at)
    page.goto(scope_url(viewer, name))
    want = [f"sample {at} stim e{i}" for i, at in enumerate((100, 300, 500, 700))]

    def listed() -> List[str]:
        return page.locator("#events .event").all_inner_texts()

    page.wait_for_function("n => document.querySelectorAll('#events .event').length >= n", arg=4, timeout=10_000)
    assert sorted(listed()) == sorted(want)

    def settle(first: int, change: Callable[[], None]) -> None:
        page.evaluate("() => { window.lastReset = window.rtloopView.reset; }")
        change()
        page.wait_for_function(
            "f => window.rtloopView.reset !== window.lastReset && window.rtloopView.reset.config.first_channel === f "
            "&& window.rtloopView.ring.lastBin >= 0", arg=first, timeout=10_000)
        page.wait_for_timeout(300)  # the events of the new configuration have come

    # channel pages and windows each send the window's events again
    settle(0, lambda: page.select_option("#per-page", "4"))
    settle(4, lambda: page.click("#page-next"))
    settle(4, lambda: page.select_option("#window", "5"))
    settle(4, lambda: page.select_option("#window", "1"))
    assert listed() == want
    # ... and so does a dropped connection, when the page connects again
    settle(4, lambda: page.evaluate("() => window.rtloopView.socket.close()"))
    assert listed() == want
    # a new event comes once, after the others
    w.push_chunk(np.zeros((100, 10), dtype=np.float32))
    w.push_event("stim", "e4", sample=1050)
    page.wait_for_function("() => document.querySelectorAll('#events .event').length >= 5", timeout=10_000)
    page.wait_for_timeout(300)
    assert listed() == want + ["sample 1050 stim e4"]
    events = page.evaluate("() => window.rtloopView.events")
    assert [e["sample"] for e in events] == [100, 300, 500, 700, 1050]
    w.close()


def test_axes_say_time_amplitude_counts_and_the_tick(viewer: Viewer, page: Any, make_name: Callable[[], str]) -> None:
    # a regular stream: the time axis spans the window chosen, in seconds, with ticks
    name = make_name()
    s = rtloop.Stream.create(name, n_channels=2, dtype="float32", sfreq=1000.0, capacity=100_000,
                             ch_names=["Fz", "Cz"], ch_units=["uV", "uV"])
    w = s.writer()
    k = np.arange(3000)[:, None]
    w.push_chunk((np.array([50.0, 100.0])[None, :] * np.sin(2 * np.pi * 5 * k / 1000)).astype(np.float32))
    page.goto(scope_url(viewer, name))
    page.wait_for_function("() => window.rtloopView.axes && window.rtloopView.axes.time.length > 2", timeout=10_000)
    ax = page.evaluate("() => window.rtloopView.axes")
    r = page.evaluate("() => ({ cols: window.rtloopView.ring.cols, spc: window.rtloopView.ring.spc })")
    assert ax["unit"] == "s"
    # the screen spans the 2 s window (to within a column), and the ticks are labelled in it
    assert ax["span"] == pytest.approx(r["cols"] * r["spc"] / 1000.0)
    assert 2.0 <= ax["span"] < 2.0 + r["spc"] / 1000.0 + 1e-9, (ax["span"], r)
    labels = [t["label"] for t in ax["time"]]
    assert labels[0] == "0" and "−1 s" in labels and "−2 s" in labels, labels
    assert all(0 <= t["x"] <= 1 for t in ax["time"])
    # each lane's scale, in the stream's unit, holds the lane's signal (one shared scale: ±100)
    for lane in ax["lanes"]:
        assert lane["unit"] == "uV" and lane["top"] >= 100 and lane["bottom"] <= -100, lane
    assert "a lane" in page.inner_text("#perf")
    # an irregular stream: the axis counts samples, and the window says samples, never seconds
    irr = make_name()
    s2 = rtloop.Stream.create(irr, n_channels=1, dtype="float32", sfreq=0.0, capacity=1000)
    w2 = s2.writer()
    w2.push_chunk(np.arange(900, dtype=np.float32)[:, None])
    page.goto(scope_url(viewer, irr))
    page.wait_for_function("() => window.rtloopView.axes && window.rtloopView.axes.unit === 'samples'", timeout=10_000)
    ax = page.evaluate("() => window.rtloopView.axes")
    assert 2000 <= ax["span"] < 2000 + page.evaluate("() => window.rtloopView.ring.spc")
    assert page.locator("#window option:checked").inner_text() == "2000 samples"
    assert not any(t["label"].endswith(" s") for t in ax["time"]), ax["time"]
    # ... and its ring keeps fewer samples than the window: a note says so
    assert page.is_visible("#scope-note")
    cap = s2.capacity  # rounded up by the stream; an eighth is left for the writer's way
    assert f"the ring keeps {cap - cap // 8} samples" in page.inner_text("#scope-note")
    # the histogram's count axis: log (an empty bin on the baseline) and linear
    page.click("#mode-hist")
    page.wait_for_function("() => window.rtloopView.histAxis", timeout=10_000)
    hx = page.evaluate("() => window.rtloopView.histAxis")
    assert hx["log"] and [c["count"] for c in hx["counts"]][:3] == [0, 1, 10]
    assert all(math.isfinite(c["y"]) for c in hx["counts"])
    assert hx["counts"][0]["y"] > hx["counts"][1]["y"]  # 0 below 1, on the baseline
    page.click("#hist-log")
    page.wait_for_function("() => !window.rtloopView.histAxis.log", timeout=10_000)
    counts = [c["count"] for c in page.evaluate("() => window.rtloopView.histAxis.counts")]
    assert counts[0] == 0 and len(counts) >= 3 and len({b - a for a, b in zip(counts, counts[1:])}) == 1, counts
    w.close()
    w2.close()


def test_the_runtime_timing_view_shows_the_tick(viewer: Viewer, page: Any) -> None:
    # what `rtloop run` publishes for a model ticking at 1 kHz (its shape and description)
    name = f"pytestmodel{os.getpid()}.tick-timing"
    s = rtloop.Stream.create(name, n_channels=2, dtype="float32", sfreq=1000.0, capacity=10_000,
                             ch_names=["tick_start_late", "filter_exec"], ch_units=["us", "us"],
                             content_type="timing")
    try:
        w = s.writer()
        w.push_chunk(np.tile(np.array([[3.0, 120.0]], dtype=np.float32), (2000, 1)))
        page.goto(scope_url(viewer, name))
        page.wait_for_function("() => window.rtloopView.axes && window.rtloopView.axes.deadline", timeout=10_000)
        assert page.evaluate("() => window.rtloopView.axes.deadline") == {"value": 1000, "unit": "us"}
        # each lane reaches past the tick, so the line shows in all of them
        for lane in page.evaluate("() => window.rtloopView.axes.lanes"):
            assert lane["bottom"] <= 0 and lane["top"] >= 1000, lane
        if os.environ.get("RTLOOP_VIEW_SHOTS"):
            page.screenshot(path=str(shots_dir() / "view-tick.png"))
        w.close()
    finally:
        if name in rtloop.Stream.list():
            rtloop.Stream.remove(name)


def test_a_probe_shows_as_a_heat_map_with_channel_labels_and_values_on_hover(
    viewer: Viewer, page: Any, make_name: Callable[[], str]
) -> None:
    name = make_name()
    n, rate = 384, 30000.0
    s = rtloop.Stream.create(name, n_channels=n, dtype="int16", sfreq=rate, capacity=200_000,
                             ch_units=["uV"] * n)
    w = s.writer()
    # flat channels with their own offsets, and one spike: channel 100 dips to -1000 uV at
    # sample 40000 of 60000 (the window's middle)
    x = np.tile((np.arange(n, dtype=np.int16) * 3)[None, :], (60_000, 1))
    x[40_000:40_030, 100] = -1000
    w.push_chunk(x)
    page.goto(scope_url(viewer, name))
    page.wait_for_function("() => window.rtloopView.ring && window.rtloopView.ring.lastBin >= 0", timeout=10_000)
    page.select_option("#per-page", "384")
    page.wait_for_function("() => window.rtloopView.ring.nch === 384 && window.rtloopView.ring.lastBin >= 0", timeout=10_000)
    page.click("#heat")
    page.wait_for_function("() => window.rtloopView.axes && window.rtloopView.axes.channels", timeout=10_000)
    # every channel has a row of its own, and the page still fits the screen
    ring = page.evaluate("() => ({ rowPx: window.rtloopView.ring.rowPx, cols: window.rtloopView.ring.cols, "
                         "spc: window.rtloopView.ring.spc, lastBin: window.rtloopView.ring.lastBin, "
                         "h: document.getElementById('scope').height })")
    assert ring["rowPx"] >= 1 and ring["h"] <= 900
    # labels at a readable step: every step-th channel, at least 14 pixels apart
    ch = page.evaluate("() => window.rtloopView.axes.channels")
    assert ch["step"] * ring["rowPx"] >= 14 and ch["step"] < 64
    assert [l["channel"] for l in ch["labels"]] == list(range(0, n, ch["step"]))
    assert ch["labels"][1]["name"] == f"ch{ch['step']}"
    # the pixels: the bluest spot of the map is channel 100's row at the spike's column
    px = page.evaluate("""() => { const c = document.getElementById('scope'), d = c.getContext('2d')
        .getImageData(0, 0, c.width, c.height).data; let best = -1, at = null;
        for (let y = 0; y < c.height; y++) for (let x = 0; x < c.width; x++) {
          const i = (y * c.width + x) * 4, blue = d[i + 2] - d[i];
          if (blue > best) { best = blue; at = [x, y]; } }
        const i = (at[1] * c.width + at[0]) * 4;
        return { x: at[0], y: at[1], rgb: [d[i], d[i + 1], d[i + 2]], w: c.width }; }""")
    assert px["y"] // ring["rowPx"] == 100, px
    spike_col = 40_000 // ring["spc"]
    assert ring["cols"] - 1 - (ring["lastBin"] - spike_col) == px["x"], (px, ring)
    assert px["rgb"][2] > 150 and px["rgb"][0] < 60, px  # deep blue
    # a channel without a spike is white at that column (its offset is taken out)
    assert page.evaluate("([x, y]) => Array.from(document.getElementById('scope').getContext('2d')"
                         ".getImageData(x, y, 1, 1).data)", [px["x"], 300 * ring["rowPx"]])[:3] == [255, 255, 255]
    # hover: the value under the pointer, in the stream's unit
    box = page.locator("#scope").bounding_box()
    page.mouse.move(box["x"] + (px["x"] + 0.5) * box["width"] / px["w"],
                    box["y"] + (100.5 * ring["rowPx"]) * box["height"] / ring["h"])
    page.wait_for_selector("#hover:not([hidden])", timeout=5_000)
    tip = page.inner_text("#hover")
    assert tip.startswith("100: ch100 · −") and "-1000 to 300 uV" in tip, tip
    if os.environ.get("RTLOOP_VIEW_SHOTS"):
        page.screenshot(path=str(shots_dir() / "view-heatmap.png"))
    w.close()
