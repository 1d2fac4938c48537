// rtloop view: the stream list, the scope (min/max columns decimated by the server next to
// the ring) and the histogram. No library: the scope draws a few hundred thousand rectangles
// a second, which one canvas path per channel does at display rate.
"use strict";

const params = new URLSearchParams(location.search);
const token = params.get("token");
const withToken = (url) => token ? url + (url.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token) : url;
const $ = (id) => document.getElementById(id);

// what the tests (and anyone curious in the console) can read
const state = window.rtloopView = {
  streams: [], selected: null, mode: "scope", paused: false,
  frames: 0, latencies: [], events: [], reset: null, lastFrame: null, errors: [],
  // where the scope's stream is in its life (from the server), and which stream file it is
  status: null, incarnation: null, axes: null, lastRow: null, resets: 0,
};
// the scope's connection, for the tests (they drop it to see the page reconnect)
Object.defineProperty(state, "socket", { get: () => socket });

// ---------------------------------------------------------------- stream list
function writerText(w) {
  if (w.ended) {
    switch (w.state) {
      case "dead": return ["dead", `DEAD (pid ${w.pid}), name removed`];
      case "removed": return ["removed", "removed"];
      default: return ["closed", "closed, name removed"];
    }
  }
  switch (w.state) {
    case "alive": return ["alive", `pid ${w.pid}` + (w.since_commit_ms > 1000 ? `, idle ${(w.since_commit_ms / 1000).toFixed(0)} s` : "")];
    case "dead": return ["dead", `DEAD (pid ${w.pid})`];
    case "closed": return ["closed", "closed"];
    default: return ["none", "none yet"];
  }
}

function fmtRate(r) { return r <= 0 ? "irregular" : r >= 1000 ? `${r / 1000} kHz` : `${r} Hz`; }

async function refreshStreams() {
  let rows;
  try {
    const r = await fetch(withToken("/api/streams"));
    if (!r.ok) throw new Error(await r.text());
    rows = await r.json();
    $("status").textContent = `${location.host} · updated ${new Date().toLocaleTimeString()}`;
    $("status").className = "status";
  } catch (e) {
    $("status").textContent = `no answer from the viewer: ${e.message}`;
    $("status").className = "status error";
    return;
  }
  state.streams = rows;
  const sel = rows.find((s) => s.name === state.selected);
  if (sel) state.lastRow = sel;
  // the scope's stream left the list (a clean close removes its name): it stays as a row that
  // says how it ended, as the scope does, until another stream is picked
  const ended = state.status && !isLive(state.status);
  if (!sel && state.selected && state.lastRow && state.lastRow.name === state.selected && ended) {
    rows = rows.concat([{ ...state.lastRow, writer: { ...state.status, ended: true } }]);
  }
  const body = $("streams").tBodies[0];
  body.replaceChildren(...rows.map((s) => {
    const tr = document.createElement("tr");
    tr.dataset.name = s.name;
    const [cls, text] = writerText(s.writer);
    tr.dataset.writer = s.writer.state;
    if (s.writer.ended) { tr.classList.add("ended"); tr.dataset.ended = "true"; }
    if (s.name === state.selected) tr.classList.add("selected");
    if (s.damage) {
      // its counters cannot be right: none of them is shown, only that and why
      tr.classList.add("damaged");
      tr.dataset.damaged = "true";
      tr.innerHTML = "<td></td><td></td><td></td><td></td><td colspan=5></td>";
      [s.name, s.dtype, s.n_channels, fmtRate(s.rate), `damaged: ${s.damage}`]
        .forEach((c, k) => { tr.cells[k].textContent = c; });
      tr.cells[4].className = "writer-damaged";
      tr.onclick = () => select(s.name);
      return tr;
    }
    const cells = [
      s.name, s.dtype, s.n_channels, fmtRate(s.rate), text, s.readers,
      `${s.percent_used.toFixed(1)}<span class="bar"><span style="width:${Math.min(100, s.percent_used)}%"></span></span>`,
      s.lost_samples, s.events_written,
    ];
    tr.innerHTML = cells.map((c) => `<td>${c}</td>`).join("");
    tr.cells[0].textContent = s.name;
    tr.cells[4].className = "writer-" + cls;
    tr.title = s.description || s.content_type || "";
    tr.onclick = () => select(s.name);
    return tr;
  }));
  $("no-streams").hidden = rows.length > 0;
  $("stream-count").textContent = `(${rows.filter((s) => !s.writer.ended && !s.damage).length})`;
}

function isLive(st) { return st.state === "live" || st.state === "waiting"; }

/// What the scope says about its stream: nothing while a writer is live, else how it ended.
function statusText(st) {
  switch (st.state) {
    case "live": return "";
    case "waiting": return "waiting for a writer: nothing written yet";
    case "closed": return "writer closed: the last samples it wrote, nothing new comes";
    case "dead": return `writer died (pid ${st.pid}): the last samples it wrote, nothing new comes`;
    case "removed": return "stream removed: its name is gone, nothing new is shown";
    case "damaged": return `stream damaged: ${st.reason}. Nothing of it is shown`;
    default: return st.state;
  }
}

function setStatus(st) {
  state.status = st;
  const text = statusText(st);
  $("banner").textContent = text;
  $("banner").hidden = !text;
  $("banner").dataset.state = st.state;
  // an ended stream's trace is dimmed, and its figures go: no frame rate, no latency
  $("scope-wrap").classList.toggle("ended", !isLive(st));
  if (!isLive(st)) { state.latencies = []; frameTimes.length = 0; }
  refreshRows();
}

/// The list's rows again, from the last listing (the scope's status changed).
function refreshRows() { if (state.streams) renderRowsLater(); }
let rowsTimer = null;
function renderRowsLater() { clearTimeout(rowsTimer); rowsTimer = setTimeout(refreshStreams, 0); }

// ---------------------------------------------------------------- scope
const canvas = $("scope"), overlay = $("overlay");
const ctx = canvas.getContext("2d", { willReadFrequently: false }), octx = overlay.getContext("2d");
let socket = null;
let ring = null;          // { cols, nch, minmax: Float32Array, bins: Float64Array, lastBin }
let page = 0, gain = 1, autoScale = true, eachScale = false, wantFrame = false, heat = false;
// frames asked for and not yet received: never more than one, so a slow page gets fewer
let inflight = 0;
// the first frame after a reset holds the whole window's backlog: its newest sample may be
// old, so it is no measure of commit to screen
let backlog = false;

const dpr = () => window.devicePixelRatio || 1;
function pixelWidth() { return Math.max(16, Math.floor(canvas.clientWidth * dpr())); }

/// Samples in a window, as the server counts them: seconds at the nominal rate, or thousands
/// of samples for an irregular stream.
function windowSamples(win, rate) { return Math.max(1, Math.ceil(win * (rate > 0 ? rate : 1000))); }

/// Columns for the window: as many as fit the screen's pixels with whole samples per column,
/// and no more than the window needs, so the screen spans the window (the canvas is stretched
/// to the page's width).
function columns(rate) {
  const ws = windowSamples(Number($("window").value), rate);
  const spc = Math.max(1, Math.ceil(ws / pixelWidth()));
  return Math.max(16, Math.min(8192, Math.ceil(ws / spc)));
}

function perPage(nch) { return Math.min(nch, Number($("per-page").value)); }

function selectedRow() { return state.streams.find((x) => x.name === state.selected) || state.lastRow; }

function scopeConfig() {
  const s = selectedRow();
  const nch = state.reset ? state.reset.n_channels : s ? s.n_channels : 1;
  const rate = state.reset ? state.reset.rate : s ? s.rate : 0;
  const n = perPage(nch);
  page = Math.max(0, Math.min(page, Math.ceil(nch / n) - 1));
  const first = page * n;
  return { window_s: Number($("window").value), columns: columns(rate), first_channel: first,
           n_channels: Math.min(n, nch - first) };
}

function openScope() {
  if (socket) { socket.onclose = null; socket.close(); socket = null; }
  ring = null; inflight = 0;
  if (!state.selected || state.mode !== "scope") return;
  const url = withToken(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws/scope?stream=${encodeURIComponent(state.selected)}`);
  socket = new WebSocket(url);
  socket.binaryType = "arraybuffer";
  socket.onopen = () => sendConfig();
  socket.onmessage = (m) => typeof m.data === "string" ? onText(JSON.parse(m.data)) : onFrame(m.data);
  socket.onclose = () => { if (state.mode === "scope") setTimeout(openScope, 1000); };
}

function sendConfig() {
  if (socket && socket.readyState === 1) socket.send(JSON.stringify({ type: "config", ...scopeConfig() }));
}

function askFrame() {
  if (inflight > 0) return;
  if (socket && socket.readyState === 1 && !state.paused) { inflight++; socket.send('{"type":"frame"}'); }
  else wantFrame = true;
}

// ------------------------------------------------ events: each once, in sample order
function clearEvents() { state.events = []; eventIndex.clear(); $("events").replaceChildren(); }
const eventIndex = new Set();

function addEvents(list) {
  let added = false;
  for (const e of list) {
    if (eventIndex.has(e.index)) continue;
    eventIndex.add(e.index);
    state.events.push(e);
    added = true;
  }
  if (!added) return;
  state.events.sort((a, b) => a.sample - b.sample || a.index - b.index);
  if (state.events.length > 500) {
    for (const e of state.events.splice(0, state.events.length - 500)) eventIndex.delete(e.index);
  }
  const box = $("events"), atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
  box.replaceChildren(...state.events.slice(-200).map((e) => {
    const d = document.createElement("div");
    d.className = "event";
    d.dataset.index = e.index;
    d.textContent = `sample ${e.sample} ${e.kind} ${e.value}`;
    return d;
  }));
  if (atEnd) box.scrollTop = box.scrollHeight;
}

function onText(msg) {
  if (msg.type === "reset") {
    // a new stream file under the name (a writer made it again): its events are other events
    if (msg.incarnation !== state.incarnation) clearEvents();
    state.incarnation = msg.incarnation;
    state.reset = msg;
    state.resets++;
    const c = msg.config;
    page = Math.floor(c.first_channel / Math.max(1, perPage(msg.n_channels)));
    ring = { cols: c.columns, nch: c.n_channels, spc: msg.samples_per_column,
             minmax: new Float32Array(c.columns * c.n_channels * 2), bins: new Float64Array(c.columns).fill(-1),
             lastBin: -1, written: 0, rate: msg.rate, names: msg.names, units: msg.units };
    state.ring = ring;
    backlog = true;
    // one backing column per decimated column; the canvas is stretched to the page's width
    canvas.width = c.columns;
    sizeCanvas();
    scaleMemo = null; drawn.lastBin = -1;
    const total = msg.n_channels, n = perPage(total);
    $("page-label").textContent = `${c.first_channel}–${c.first_channel + c.n_channels - 1} of ${total}`;
    $("panel-title").textContent = `${msg.stream} · ${msg.dtype} · ${fmtRate(msg.rate)} · ${msg.samples_per_column} samples a column`;
    $("page-prev").disabled = page === 0;
    $("page-next").disabled = (page + 1) * n >= total;
    windowLabels(msg.rate);
    // the ring keeps fewer samples than the window: say so, the left part stays empty
    const ws = windowSamples(c.window_s, msg.rate), keeps = msg.capacity - Math.floor(msg.capacity / 8);
    $("scope-note").hidden = ws <= keeps;
    $("scope-note").textContent = ws <= keeps ? "" :
      `the ring keeps ${msg.rate > 0 ? fmtSeconds(keeps / msg.rate) : `${keeps} samples`} of this stream, less than ` +
      `the window: the window fills as samples come, and starts from that much after a change or a pause`;
    setStatus(msg.status);
    askFrame();
  } else if (msg.type === "status") {
    setStatus(msg.status);
  } else if (msg.type === "events") {
    addEvents(msg.events);
  } else if (msg.type === "error") {
    state.errors.push(msg.message);
    $("panel-title").textContent = `${state.selected}: ${msg.message}`;
  }
}

/// The trace's height: lanes of at least 4 pixels (a 384-channel page of traces scrolls
/// instead of drawing 1-pixel lanes); a heat map gives every channel a row of whole pixels
/// and keeps a strip below them for the time axis.
function sizeCanvas() {
  if (!ring) return;
  const nch = ring.nch, px = dpr();
  if (heat) {
    ring.rowPx = Math.max(1, Math.floor(800 * px / nch));
    canvas.height = nch * ring.rowPx + Math.round(AXIS_STRIP * px);
  } else {
    canvas.height = Math.max(560, nch * 4 * px) + Math.round(AXIS_STRIP * px);
  }
  // the lanes or rows end above the time axis' strip
  ring.plotH = canvas.height - Math.round(AXIS_STRIP * px);
  canvas.style.height = `${canvas.height / px}px`;
  scaleMemo = null; drawn.lastBin = -1;
}

/// The window's choices in the stream's terms: seconds, or samples for an irregular stream.
function windowLabels(rate) {
  for (const o of $("window").options) {
    const v = Number(o.value);
    o.textContent = rate > 0 ? `${v} s` : `${v * 1000} samples`;
  }
}

function onFrame(buf) {
  inflight = Math.max(0, inflight - 1);
  if (!ring) return;
  const h = new Float64Array(buf, 0, 8);
  const [written, firstBin, nBins, nch, commitMs] = h;
  const data = new Float32Array(buf, 64);
  for (let i = 0; i < nBins; i++) {
    const b = firstBin + i, slot = b % ring.cols;
    ring.bins[slot] = b;
    ring.minmax.set(data.subarray(i * nch * 2, (i + 1) * nch * 2), slot * nch * 2);
    if (b > ring.lastBin) ring.lastBin = b;
  }
  const fresh = written > ring.written && !backlog;
  backlog = false;
  ring.written = written;
  state.lastFrame = { written, firstBin, nBins, nch, data: Array.from(data) };
  const live = !state.status || isLive(state.status);
  requestAnimationFrame(() => {
    draw();
    state.frames++;
    // commit of the newest sample to the screen: both clocks are this machine's; only while
    // a writer is live (an ended stream's newest sample is as old as its end)
    if (live && fresh && !Number.isNaN(commitMs)) {
      state.latencies.push(performance.timeOrigin + performance.now() - commitMs);
      if (state.latencies.length > 5000) state.latencies.splice(0, 1000);
    }
    // an ended stream is asked four times a second, to see a writer that makes it again
    if (live) askFrame(); else setTimeout(askFrame, 250);
  });
}

function pageRange() {
  // per channel centre and one shared half-range, over what is on screen
  const { cols, nch, minmax, bins, lastBin } = ring;
  const lo = new Float64Array(nch).fill(Infinity), hi = new Float64Array(nch).fill(-Infinity);
  const sum = new Float64Array(nch);
  let shown = 0;
  for (let s = 0; s < cols; s++) {
    if (bins[s] < 0 || lastBin - bins[s] >= cols) continue;
    shown++;
    for (let c = 0; c < nch; c++) {
      const a = minmax[(s * nch + c) * 2], b = minmax[(s * nch + c) * 2 + 1];
      if (a < lo[c]) lo[c] = a;
      if (b > hi[c]) hi[c] = b;
      sum[c] += (a + b) / 2;
    }
  }
  // the heat map's centre of a channel is its mean (its offset), so a spike stands out and
  // its baseline is white; its reach is the largest swing from there
  const mean = sum.map((x) => x / Math.max(1, shown));
  let swing = 0;
  const swings = new Float64Array(nch);
  for (let c = 0; c < nch; c++) {
    if (lo[c] > hi[c]) continue;
    swings[c] = Math.max(hi[c] - mean[c], mean[c] - lo[c]);
    swing = Math.max(swing, swings[c]);
  }
  for (let c = 0; c < nch; c++) swings[c] = eachScale ? (swings[c] > 0 ? swings[c] : 1) : (swing > 0 ? swing : 1);
  // a timing stream's lanes reach from 0 to past the tick, so the deadline line shows
  const dl = deadline();
  if (dl !== null) for (let c = 0; c < nch; c++) { lo[c] = Math.min(lo[c], 0); hi[c] = Math.max(hi[c], dl * 1.1); }
  // one shared scale, as a scope's µV per division; or each channel fitted on its own
  let shared = 0;
  const mid = new Float64Array(nch), half = new Float64Array(nch);
  for (let c = 0; c < nch; c++) {
    if (lo[c] > hi[c]) continue;
    mid[c] = (lo[c] + hi[c]) / 2;
    half[c] = (hi[c] - lo[c]) / 2;
    shared = Math.max(shared, half[c]);
  }
  for (let c = 0; c < nch; c++) half[c] = eachScale ? (half[c] > 0 ? half[c] : 1) : (shared > 0 ? shared : 1);
  return { mid, half, lo, hi, mean, swings };
}

/// The runtime's tick, in the timing stream's unit (µs), for `<model>.tick-timing`: one row a
/// tick, so the tick is one over the rate.
function deadline() {
  const r = state.reset;
  if (!r || r.content_type !== "timing" || !(r.rate > 0)) return null;
  return 1e6 / r.rate;
}

let scaleMemo = null;
// what the trace canvas holds: the newest bin drawn and the scale it was drawn with
let drawn = { lastBin: -1, scale: null, W: 0, H: 0 };
// lane colours, as little-endian RGBA words
const INK = [0xff30231d, 0xff7e4c2b];

/// The scale to draw with: refitted every few frames in auto mode, and only taken when it
/// moved by more than 10 % (a steady picture, and a full redraw only then).
function currentScale(frame) {
  const nch = ring.nch;
  // a new gain is a new scale (and one full redraw)
  if (scaleMemo && scaleMemo.gain !== gain) scaleMemo = { ...scaleMemo, gain };
  if (scaleMemo && scaleMemo.nch === nch && (!autoScale || frame % 10 !== 0)) return scaleMemo;
  const fit = { ...pageRange(), nch, gain };
  if (scaleMemo && scaleMemo.nch === nch) {
    let moved = false;
    for (let c = 0; c < nch && !moved; c++) {
      const h = scaleMemo.half[c];
      moved = Math.abs(fit.half[c] - h) > 0.1 * h || Math.abs(fit.mid[c] - scaleMemo.mid[c]) > 0.1 * h;
    }
    if (!moved) { scaleMemo.lo = fit.lo; scaleMemo.hi = fit.hi; return scaleMemo; }
  }
  scaleMemo = fit;
  return fit;
}

/// Draw columns [x0, x1) of an n-column trace into `pix` (a buffer x1 - x0 pixels wide):
/// one vertical run per column and channel, joined to the column before, so the cost is the
/// pixels drawn.
function drawColumns(pix, x0, x1, n, H, sc) {
  const { cols, nch, minmax, bins, lastBin } = ring;
  const bw = x1 - x0, lane = H / nch;
  for (let c = 0; c < nch; c++) {
    const y0 = lane * (c + 0.5), ink = INK[c % 2], m = sc.mid[c], k = (lane / 2) * 0.9 * gain / sc.half[c];
    const run = (x) => {
      const b = lastBin - (n - 1 - x);
      if (b < 0 || x < 0) return null;
      const s = b % cols;
      if (bins[s] !== b) return null;
      const i = (s * nch + c) * 2;
      return [Math.round(y0 - (minmax[i + 1] - m) * k), Math.round(y0 - (minmax[i] - m) * k)];
    };
    let prev = run(x0 - 1);
    for (let x = x0; x < x1; x++) {
      const r = run(x);
      if (!r) { prev = null; continue; }
      let [lo, hi] = r;
      // join the previous column, so a steep edge is a line, not dots
      if (prev && prev[1] < lo) lo = prev[1];
      if (prev && prev[0] > hi) hi = prev[0];
      prev = r;
      lo = Math.max(0, lo); hi = Math.min(H - 1, hi);
      for (let y = lo, p = lo * bw + (x - x0); y <= hi; y++, p += bw) pix[p] = ink;
    }
  }
}

// the heat map's colours: blue (below the channel's mean) through white (at it: index 127)
// to red (above), as little-endian RGBA words
const HEAT = new Uint32Array(255).map((_, i) => {
  const t = i / 127 - 1, a = Math.abs(t);
  const [r, g, b] = t < 0 ? [255 * (1 - a) + 33 * a, 255 * (1 - a) + 102 * a, 255 * (1 - a) + 172 * a]
                          : [255 * (1 - a) + 178 * a, 255 * (1 - a) + 24 * a, 255 * (1 - a) + 43 * a];
  return (0xff << 24 | Math.round(b) << 16 | Math.round(g) << 8 | Math.round(r)) >>> 0;
});
const AXIS_STRIP = 18;

/// Columns [x0, x1) of the heat map into `pix`: one row of `rowPx` pixels per channel, each
/// column coloured by whichever of its minimum and maximum lies further from the channel's
/// mean (a spike's trough shows however short it is).
function drawHeat(pix, x0, x1, n, sc) {
  const { cols, nch, minmax, bins, lastBin, rowPx } = ring;
  const bw = x1 - x0;
  for (let x = x0; x < x1; x++) {
    const b = lastBin - (n - 1 - x);
    if (b < 0) continue;
    const s = b % cols;
    if (bins[s] !== b) continue;
    const base = s * nch * 2;
    for (let c = 0; c < nch; c++) {
      const m = sc.mean[c], k = 127 * gain / sc.swings[c];
      const a = minmax[base + 2 * c] - m, z = minmax[base + 2 * c + 1] - m;
      const v = -a > z ? a : z;
      const i = Math.max(0, Math.min(254, Math.round(127 + v * k)));
      const ink = HEAT[i];
      for (let y = c * rowPx, p = y * bw + (x - x0), e = y + rowPx; y < e; y++, p += bw) pix[p] = ink;
    }
  }
}

function draw() {
  const W = canvas.width, H = canvas.height;
  const OW = Math.max(16, Math.round(overlay.clientWidth * dpr())) || W;
  if (overlay.width !== OW) overlay.width = OW;
  if (overlay.height !== H) overlay.height = H;
  if (!ring || ring.lastBin < 0) { ctx.clearRect(0, 0, W, H); octx.clearRect(0, 0, OW, H); drawn.lastBin = -1; return; }
  const { cols, lastBin } = ring;
  const sc = currentScale(state.frames);
  const n = Math.min(cols, W);
  const dx = lastBin - drawn.lastBin;
  const full = drawn.lastBin < 0 || drawn.scale !== sc || drawn.W !== W || drawn.H !== H || dx < 0 || dx >= n - 2;
  // scrolling: move what is drawn left by the new columns and draw only those (and the column
  // that was still filling); a full redraw only when the scale, size or stream changed
  const x0 = full ? 0 : n - 1 - dx;
  if (!full && dx > 0) ctx.drawImage(canvas, -dx, 0);
  const strip = ctx.createImageData(n - x0, H);
  const pix = new Uint32Array(strip.data.buffer);
  pix.fill(0xffffffff);
  if (heat) drawHeat(pix, x0, n, n, sc); else drawColumns(pix, x0, n, n, ring.plotH, sc);
  ctx.putImageData(strip, x0, 0);
  if (full && W > n) ctx.clearRect(n, 0, W - n, H);
  drawn = { lastBin, scale: sc, W, H };
  drawOverlay(OW, H, sc);
}

function fmtSeconds(s) {
  const a = Math.abs(s);
  return a === 0 ? "0 s" : a < 1 ? `${Number((s * 1000).toPrecision(3))} ms` : `${Number(s.toPrecision(3))} s`;
}

/// A step of 1, 2 or 5 times a power of ten that cuts `span` into at most `most` parts.
function niceStep(span, most) {
  const raw = span / most, p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

/// Labels, amplitude scales, the tick deadline, event markers and the time axis, on their own
/// canvas above the trace (at the screen's resolution, the trace's columns stretched to it).
function drawOverlay(W, H, sc) {
  const { cols, nch, lastBin, spc } = ring;
  const lane = ring.plotH / nch, sx = W / cols, px = dpr();
  const axes = state.axes = { time: [], lanes: [], unit: "", deadline: null };
  octx.clearRect(0, 0, W, H);
  octx.font = `${11 * px}px system-ui, sans-serif`;
  octx.textBaseline = "alphabetic";
  const dl = heat ? null : deadline();
  // per lane: name and unit, and the values at the lane's top and bottom edges (the scale)
  const scaled = lane >= 28 * px;
  if (heat) heatLabels(W, sc);
  for (let c = 0; c < nch && !heat; c++) {
    const u = ring.units[c] || "";
    const k = (lane / 2) * 0.9 * sc.gain / sc.half[c];
    const top = sc.mid[c] + (lane / 2) / k, bottom = sc.mid[c] - (lane / 2) / k;
    axes.lanes.push({ name: ring.names[c], unit: u, top, bottom });
    if (dl !== null) {
      const y = lane * (c + 0.5) - (dl - sc.mid[c]) * k;
      if (y >= lane * c && y <= lane * (c + 1)) {
        octx.strokeStyle = "rgba(192,38,45,0.8)"; octx.setLineDash([6 * px, 4 * px]);
        octx.beginPath(); octx.moveTo(0, y); octx.lineTo(W, y); octx.stroke(); octx.setLineDash([]);
        octx.fillStyle = "#c0262d";
        octx.fillText(`tick ${fmtValue(dl)} ${u}`, W - 190 * px, y - 3 * px);
        axes.deadline = { value: dl, unit: u };
      }
    }
    if (lane >= 10 * px) {
      const text = ring.names[c] + (u ? ` (${u})` : "");
      octx.fillStyle = "rgba(255,255,255,0.8)";
      octx.fillRect(2 * px, lane * c + px, octx.measureText(text).width + 4 * px, 13 * px);
      octx.fillStyle = "#4b5563";
      octx.fillText(text, 4 * px, lane * c + 11 * px);
    }
    if (scaled) {
      octx.fillStyle = "#6b7280";
      const t = `${fmtValue(top)} ${u}`, b = `${fmtValue(bottom)} ${u}`;
      octx.fillText(t, W - octx.measureText(t).width - 4 * px, lane * c + 11 * px);
      octx.fillText(b, W - octx.measureText(b).width - 4 * px, lane * (c + 1) - 3 * px);
      octx.strokeStyle = "#c9ced6";
      octx.beginPath(); octx.moveTo(W - 2 * px, lane * c + px); octx.lineTo(W - 2 * px, lane * (c + 1) - px); octx.stroke();
    }
    if (c > 0) { octx.fillStyle = "#eef0f3"; octx.fillRect(0, Math.round(lane * c), W, px); }
  }
  // events at their samples
  octx.strokeStyle = "#c0262d"; octx.fillStyle = "#c0262d";
  for (const e of state.events) {
    const b = Math.floor(e.sample / spc);
    if (lastBin - b >= cols || b > lastBin) continue;
    const x = (cols - 1 - (lastBin - b) + 0.5) * sx;
    octx.beginPath(); octx.moveTo(x, 0); octx.lineTo(x, H); octx.stroke();
    octx.fillText(`${e.kind} ${e.value}`.slice(0, 40), Math.min(x + 3 * px, W - 120 * px), H - 30 * px);
  }
  // time axis: the newest sample at the right edge; seconds before it at the nominal rate, or
  // samples before it for an irregular stream (its samples are not evenly spaced in time)
  const rate = ring.rate, span = cols * spc, perUnit = rate > 0 ? rate : 1;
  const step = niceStep(span / perUnit, 8);
  axes.unit = rate > 0 ? "s" : "samples";
  octx.fillStyle = "rgba(255,255,255,0.85)"; octx.fillRect(0, H - 16 * px, W, 16 * px);
  octx.strokeStyle = "#9aa1ad"; octx.fillStyle = "#4b5563";
  octx.beginPath(); octx.moveTo(0, H - 16 * px); octx.lineTo(W, H - 16 * px); octx.stroke();
  // the right edge is the end of the newest column
  const newest = (lastBin + 1) * spc;
  for (let i = 0, t = 0; t <= span / perUnit + 1e-9; i++, t = i * step) {
    const x = W - (t * perUnit / span) * W;
    // an irregular stream's axis counts samples before the newest (they are not evenly
    // spaced in time); the newest end says so
    const label = t === 0 ? (rate > 0 ? "0" : "0 samples") : rate > 0 ? `−${fmtSeconds(t)}` : `−${Number(t.toPrecision(6))}`;
    axes.time.push({ x: x / W, value: -t, label });
    octx.beginPath(); octx.moveTo(x, H - 16 * px); octx.lineTo(x, H - 12 * px); octx.stroke();
    const w = octx.measureText(label).width;
    octx.fillText(label, Math.max(2 * px, Math.min(W - w - 2 * px, x - w / 2)), H - 2 * px);
  }
  axes.span = span / perUnit;
  axes.newest = newest;
  const live = !state.status || isLive(state.status);
  const scaleText = heat
    ? `colour: ${eachScale ? "each channel fitted" : `±${fmtValue(sc.swings[0] / gain)} ${ring.units[0] || ""}`} from each channel's mean (blue below, red above)`
    : eachScale ? "each channel fitted" : `±${fmtValue(sc.half[0] / gain)} ${ring.units[0] || ""} a lane`;
  if (!live) { $("perf").textContent = `no new samples · ${scaleText}`; return; }
  const perf = state.latencies.slice(-300).sort((a, b) => a - b);
  const p = (q) => perf.length ? perf[Math.min(perf.length - 1, Math.round(q * (perf.length - 1)))].toFixed(1) : "–";
  $("perf").textContent = `${fps().toFixed(0)} frames/s · commit to screen p50 ${p(0.5)} ms, p99 ${p(0.99)} ms · ${scaleText}`;
}

/// The heat map's channel labels: every channel when its row is tall enough, else every
/// `step`-th channel, with `step` picked so labels stand at least 14 pixels apart.
function heatLabels(W, sc) {
  const { nch, rowPx } = ring, px = dpr();
  const step = [1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128].find((k) => k * rowPx >= 14 * px) || nch;
  const first = state.reset ? state.reset.config.first_channel : 0;
  const labels = [];
  octx.font = `${10 * px}px system-ui, sans-serif`;
  octx.textBaseline = "middle";
  for (let c = 0; c < nch; c++) {
    if ((first + c) % step !== 0) continue;
    const y = Math.max(6 * px, (c + 0.5) * rowPx), text = ring.names[c];
    labels.push({ channel: first + c, name: text, y: y / canvas.height });
    octx.fillStyle = "rgba(255,255,255,0.75)";
    octx.fillRect(0, y - 6 * px, octx.measureText(text).width + 6 * px, 12 * px);
    octx.fillStyle = "#1d2330";
    octx.fillText(text, 3 * px, y);
    octx.fillRect(0, Math.round(y), 2 * px, px);
  }
  octx.textBaseline = "alphabetic";
  octx.font = `${11 * px}px system-ui, sans-serif`;
  state.axes.channels = { step, labels };
}

/// What is under the pointer: the channel, the time before the newest sample and the
/// column's minimum and maximum, in the stream's unit.
function hoverAt(ev) {
  const tip = $("hover");
  if (!ring || ring.lastBin < 0 || state.mode !== "scope") { tip.hidden = true; return; }
  const r = canvas.getBoundingClientRect();
  const fx = (ev.clientX - r.left) / r.width, fy = (ev.clientY - r.top) / r.height;
  const rows = (heat ? ring.nch * ring.rowPx : ring.plotH) / canvas.height;
  const c = Math.floor((fy / rows) * ring.nch);
  const col = Math.min(ring.cols - 1, Math.floor(fx * ring.cols));
  const b = ring.lastBin - (ring.cols - 1 - col), s = b % ring.cols;
  if (c < 0 || c >= ring.nch || b < 0 || ring.bins[s] !== b) { tip.hidden = true; state.hover = null; return; }
  const i = (s * ring.nch + c) * 2, lo = ring.minmax[i], hi = ring.minmax[i + 1], u = ring.units[c] || "";
  const ago = ((ring.lastBin - b) * ring.spc) / (ring.rate > 0 ? ring.rate : 1);
  const when = ring.rate > 0 ? `−${fmtSeconds(ago)}` : `${ago} samples before the newest`;
  const first = state.reset ? state.reset.config.first_channel : 0;
  state.hover = { channel: first + c, name: ring.names[c], min: lo, max: hi, unit: u, ago };
  tip.textContent = `${first + c}: ${ring.names[c]} · ${when} · ${lo === hi ? fmtValue(lo) : `${fmtValue(lo)} to ${fmtValue(hi)}`}${u ? " " + u : ""}`;
  tip.hidden = false;
  const wrap = $("scope-wrap").getBoundingClientRect();
  tip.style.left = `${Math.min(ev.clientX - wrap.left + 12, wrap.width - tip.offsetWidth - 4)}px`;
  tip.style.top = `${ev.clientY - wrap.top + 12}px`;
}
canvas.addEventListener("mousemove", hoverAt);
canvas.addEventListener("mouseleave", () => { $("hover").hidden = true; state.hover = null; });

function setHeat(on) {
  heat = on;
  $("heat").classList.toggle("on", on);
  sizeCanvas();
  draw();
}

const frameTimes = [];
function fps() {
  const now = performance.now();
  frameTimes.push(now);
  while (frameTimes.length && now - frameTimes[0] > 1000) frameTimes.shift();
  return frameTimes.length;
}

// ---------------------------------------------------------------- histogram
let histTimer = null, histLog = true;
async function refreshHistogram() {
  if (state.mode !== "hist" || !state.selected || state.paused) return;
  const ch = Number($("hist-channel").value || 0);
  const r = await fetch(withToken(`/api/streams/${encodeURIComponent(state.selected)}/histogram?channel=${ch}&samples=100000`));
  if (!r.ok) { $("panel-title").textContent = `${state.selected}: ${(await r.text()).trim()}`; return; }
  const h = await r.json();
  state.histogram = h;
  drawHistogram(h);
}

function fmtValue(v) {
  const a = Math.abs(v);
  return a >= 1e4 || (a < 0.01 && a > 0) ? v.toExponential(1) : Number(v.toPrecision(3)).toString();
}

function drawHistogram(h) {
  const px = dpr();
  canvas.style.height = "480px";
  const W = canvas.width = pixelWidth(), H = canvas.height = Math.round(480 * px);
  overlay.width = W; overlay.height = H;
  ctx.clearRect(0, 0, W, H);
  octx.clearRect(0, 0, overlay.width, overlay.height);
  drawn.lastBin = -1;
  const L = 64 * px, R = 10 * px, T = 24 * px, B = 36 * px;
  const x = (v) => {
    const lo = h.edges[0], hi = h.edges[h.edges.length - 1];
    const f = h.log ? (Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo) || 1) : (v - lo) / ((hi - lo) || 1);
    return L + f * (W - L - R);
  };
  const top = Math.max(...h.counts, 1);
  // counts on a log axis (a single millisecond sample in a tail still shows) or a linear one;
  // the log axis is of count + 1, so an empty bin sits on the baseline, never at -infinity
  const y = histLog
    ? (c) => H - B - (Math.log10(c + 1) / Math.log10(top + 1)) * (H - B - T)
    : (c) => H - B - (c / top) * (H - B - T);
  // the colours of the PNG histograms the tools write (rtloop-metrics' charts)
  ctx.fillStyle = "rgb(31,119,180)";
  h.counts.forEach((c, i) => {
    if (c === 0) return;
    const x0 = x(h.edges[i]), x1 = x(h.edges[i + 1]);
    ctx.fillRect(x0, y(c), Math.max(1, x1 - x0 - 0.5), H - B - y(c));
  });
  ctx.strokeStyle = "#9aa1ad"; ctx.beginPath(); ctx.moveTo(L, H - B); ctx.lineTo(W - R, H - B); ctx.moveTo(L, T); ctx.lineTo(L, H - B); ctx.stroke();
  ctx.fillStyle = "#1d2330"; ctx.font = `${11 * px}px system-ui, sans-serif`;
  const ticks = h.log
    ? Array.from({ length: 30 }, (_, i) => 10 ** (Math.floor(Math.log10(h.edges[0])) + i)).filter((t) => t >= h.edges[0] && t <= h.edges[h.edges.length - 1])
    : Array.from({ length: 6 }, (_, i) => h.edges[0] + (i / 5) * (h.edges[h.edges.length - 1] - h.edges[0]));
  for (const t of ticks) { ctx.fillText(fmtValue(t), x(t) - 10 * px, H - B + 14 * px); }
  // the count axis: 0, then powers of ten (log) or even steps (linear), up to the top count
  const counts = histLog
    ? [0, ...Array.from({ length: 10 }, (_, i) => 10 ** i).filter((c) => c <= top)]
    : Array.from({ length: Math.floor(top / niceStep(top, 5)) + 1 }, (_, i) => i * niceStep(top, 5));
  state.histAxis = { log: histLog, counts: counts.map((c) => ({ count: c, y: y(c) / H })) };
  ctx.textAlign = "right";
  for (const c of counts) {
    ctx.fillText(c >= 1e4 ? c.toExponential(0) : String(c), L - 6 * px, y(c) + 4 * px);
    ctx.beginPath(); ctx.moveTo(L - 4 * px, y(c)); ctx.lineTo(L, y(c)); ctx.stroke();
  }
  ctx.save(); ctx.translate(14 * px, (T + H - B) / 2); ctx.rotate(-Math.PI / 2); ctx.textAlign = "center";
  ctx.fillText(histLog ? "samples (log)" : "samples", 0, 0); ctx.restore();
  ctx.textAlign = "left";
  const unit = (state.units || [])[h.channel];
  if (unit) ctx.fillText(unit, W - R - 20 * px, H - B + 28 * px);
  const marks = [["p50", h.p50, "rgb(44,160,44)"], ["p99", h.p99, "rgb(255,127,14)"], ["p99.9", h.p999, "rgb(214,39,40)"]];
  marks.forEach(([name, v, col], i) => {
    ctx.strokeStyle = col; ctx.fillStyle = col;
    ctx.beginPath(); ctx.moveTo(x(v), T); ctx.lineTo(x(v), H - B); ctx.stroke();
    ctx.fillText(`${name} ${fmtValue(v)}`, Math.min(x(v) + 3 * px, W - 90 * px), T + 14 * px * i);
  });
  const s = selectedRow();
  $("perf").textContent = `${h.n} samples · min ${fmtValue(h.min)} · p50 ${fmtValue(h.p50)} · p99 ${fmtValue(h.p99)} · p99.9 ${fmtValue(h.p999)} · max ${fmtValue(h.max)}${h.log ? " · log axis" : ""}`;
  $("panel-title").textContent = `${state.selected}${s ? " · " + s.dtype : ""} · histogram of the newest samples`;
}

// ---------------------------------------------------------------- controls
async function select(name) {
  // another stream: nothing of the last one's scope carries over
  if (name !== state.selected) {
    state.reset = null; state.status = null; state.incarnation = null; state.axes = null;
    state.lastRow = state.streams.find((x) => x.name === name) || null;
    state.latencies = [];
    clearEvents();
    $("banner").hidden = true; $("scope-wrap").classList.remove("ended");
  }
  state.selected = name;
  page = 0;
  for (const tr of $("streams").tBodies[0].rows) tr.classList.toggle("selected", tr.dataset.name === name);
  const r = await fetch(withToken(`/api/streams/${encodeURIComponent(name)}`));
  if (r.ok) {
    const d = await r.json();
    $("hist-channel").replaceChildren(...d.channels.names.map((n, i) => new Option(`${i}: ${n}`, i)));
    state.units = d.channels.units;
  }
  const row = state.streams.find((x) => x.name === name);
  setEach(!!row && ["timing", "latency-lab"].includes(row.content_type));
  history.replaceState(null, "", "?" + new URLSearchParams({ ...(token ? { token } : {}), stream: name }));
  setMode(state.mode);
}

function setMode(mode) {
  state.mode = mode;
  $("mode-scope").classList.toggle("on", mode === "scope");
  $("mode-hist").classList.toggle("on", mode === "hist");
  for (const e of document.querySelectorAll(".scope-only")) e.hidden = mode !== "scope";
  for (const e of document.querySelectorAll(".hist-only")) e.hidden = mode !== "hist";
  $("events").hidden = mode !== "scope";
  clearInterval(histTimer);
  if (mode === "hist") {
    if (socket) { socket.onclose = null; socket.close(); socket = null; }
    refreshHistogram();
    histTimer = setInterval(refreshHistogram, 250);
  } else {
    openScope();
  }
}

function setEach(on) {
  eachScale = on;
  $("scale-each").classList.toggle("on", on);
  scaleMemo = null;
  draw();
}

function setPaused(p) {
  state.paused = p;
  $("pause").classList.toggle("on", p);
  $("pause").textContent = p ? "resume" : "pause";
  // resuming starts from the newest window, as a scope does
  if (!p && state.mode === "scope") { wantFrame = false; sendConfig(); }
}

$("mode-scope").onclick = () => setMode("scope");
$("mode-hist").onclick = () => setMode("hist");
$("window").onchange = () => sendConfig();
$("per-page").onchange = () => { page = 0; sendConfig(); };
$("page-prev").onclick = () => { page = Math.max(0, page - 1); sendConfig(); };
$("page-next").onclick = () => { page += 1; sendConfig(); };
$("scale-up").onclick = () => { gain *= 1.5; draw(); };
$("scale-down").onclick = () => { gain /= 1.5; draw(); };
$("scale-auto").onclick = () => { autoScale = !autoScale; $("scale-auto").classList.toggle("on", autoScale); gain = 1; scaleMemo = null; draw(); };
$("scale-each").onclick = () => setEach(!eachScale);
$("heat").onclick = () => setHeat(!heat);
$("hist-channel").onchange = () => refreshHistogram();
$("hist-log").onclick = () => {
  histLog = !histLog;
  $("hist-log").classList.toggle("on", histLog);
  $("hist-log").textContent = histLog ? "log counts" : "linear counts";
  if (state.histogram) drawHistogram(state.histogram);
};
$("pause").onclick = () => setPaused(!state.paused);
canvas.addEventListener("wheel", (e) => {
  e.preventDefault();
  if (e.shiftKey) {  // shift + wheel: the window (time zoom)
    const sel = $("window"), i = sel.selectedIndex + (e.deltaY > 0 ? 1 : -1);
    if (i >= 0 && i < sel.options.length) { sel.selectedIndex = i; sendConfig(); }
  } else { gain *= e.deltaY > 0 ? 1 / 1.25 : 1.25; draw(); }
}, { passive: false });
document.addEventListener("keydown", (e) => { if (e.code === "Space" && e.target === document.body) { e.preventDefault(); setPaused(!state.paused); } });
let resizeTimer = null;
window.addEventListener("resize", () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(sendConfig, 200); });

refreshStreams().then(() => { const s = params.get("stream"); if (s) select(s); });
setInterval(refreshStreams, 500);
