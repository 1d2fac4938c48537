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
};

// ---------------------------------------------------------------- stream list
function writerText(w) {
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
  const body = $("streams").tBodies[0];
  body.replaceChildren(...rows.map((s) => {
    const tr = document.createElement("tr");
    tr.dataset.name = s.name;
    const [cls, text] = writerText(s.writer);
    tr.dataset.writer = s.writer.state;
    if (s.name === state.selected) tr.classList.add("selected");
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
  $("stream-count").textContent = `(${rows.length})`;
  if (state.selected && !rows.some((s) => s.name === state.selected)) {
    $("panel-title").textContent = `${state.selected}: removed`;
  }
}

// ---------------------------------------------------------------- scope
const canvas = $("scope"), overlay = $("overlay");
const ctx = canvas.getContext("2d", { willReadFrequently: false }), octx = overlay.getContext("2d");
let socket = null;
let ring = null;          // { cols, nch, minmax: Float32Array, bins: Float64Array, lastBin }
let page = 0, gain = 1, autoScale = true, eachScale = false, wantFrame = false;

function columns() {
  const w = Math.max(16, Math.floor(canvas.clientWidth * (window.devicePixelRatio || 1)));
  if (canvas.width !== w) canvas.width = w;
  return w;
}

function perPage(nch) { return Math.min(nch, Number($("per-page").value)); }

function scopeConfig() {
  const s = state.streams.find((x) => x.name === state.selected);
  const nch = s ? s.n_channels : 1;
  const n = perPage(nch);
  page = Math.max(0, Math.min(page, Math.ceil(nch / n) - 1));
  const first = page * n;
  return { window_s: Number($("window").value), columns: columns(), first_channel: first,
           n_channels: Math.min(n, nch - first) };
}

function openScope() {
  if (socket) { socket.onclose = null; socket.close(); socket = null; }
  ring = null;
  state.events = []; $("events").replaceChildren();
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
  if (socket && socket.readyState === 1 && !state.paused) socket.send('{"type":"frame"}');
  else wantFrame = true;
}

function onText(msg) {
  if (msg.type === "reset") {
    state.reset = msg;
    const c = msg.config;
    ring = { cols: c.columns, nch: c.n_channels, spc: msg.samples_per_column,
             minmax: new Float32Array(c.columns * c.n_channels * 2), bins: new Float64Array(c.columns).fill(-1),
             lastBin: -1, written: 0, rate: msg.rate, names: msg.names, units: msg.units };
    state.ring = ring;
    // a lane of at least 4 pixels: a 384-channel page scrolls instead of drawing 1-pixel lanes
    const dpr = window.devicePixelRatio || 1;
    canvas.height = Math.max(560, c.n_channels * 4 * dpr);
    canvas.style.height = `${canvas.height / dpr}px`;
    scaleMemo = null; drawn.lastBin = -1;
    const total = msg.n_channels, n = perPage(total);
    $("page-label").textContent = `${c.first_channel}–${c.first_channel + c.n_channels - 1} of ${total}`;
    $("panel-title").textContent = `${msg.stream} · ${msg.dtype} · ${fmtRate(msg.rate)} · ${msg.samples_per_column} samples a column`;
    $("page-prev").disabled = page === 0;
    $("page-next").disabled = (page + 1) * n >= total;
    askFrame();
  } else if (msg.type === "events") {
    for (const e of msg.events) {
      state.events.push(e);
      const d = document.createElement("div");
      d.className = "event";
      d.textContent = `sample ${e.sample} ${e.kind} ${e.value}`;
      $("events").prepend(d);
    }
    if (state.events.length > 500) state.events.splice(0, state.events.length - 500);
    while ($("events").childElementCount > 200) $("events").lastChild.remove();
  } else if (msg.type === "error") {
    state.errors.push(msg.message);
    $("panel-title").textContent = `${state.selected}: ${msg.message}`;
  }
}

function onFrame(buf) {
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
  const fresh = written > ring.written;
  ring.written = written;
  state.lastFrame = { written, firstBin, nBins, nch, data: Array.from(data) };
  requestAnimationFrame(() => {
    draw();
    state.frames++;
    // commit of the newest sample to the screen: both clocks are this machine's
    if (fresh && !Number.isNaN(commitMs)) {
      state.latencies.push(performance.timeOrigin + performance.now() - commitMs);
      if (state.latencies.length > 5000) state.latencies.splice(0, 1000);
    }
    askFrame();
  });
}

function pageRange() {
  // per channel centre and one shared half-range, over what is on screen
  const { cols, nch, minmax, bins, lastBin } = ring;
  const lo = new Float64Array(nch).fill(Infinity), hi = new Float64Array(nch).fill(-Infinity);
  for (let s = 0; s < cols; s++) {
    if (bins[s] < 0 || lastBin - bins[s] >= cols) continue;
    for (let c = 0; c < nch; c++) {
      const a = minmax[(s * nch + c) * 2], b = minmax[(s * nch + c) * 2 + 1];
      if (a < lo[c]) lo[c] = a;
      if (b > hi[c]) hi[c] = b;
    }
  }
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
  return { mid, half, lo, hi };
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

function draw() {
  const W = canvas.width, H = canvas.height;
  overlay.width = W; overlay.height = H;
  if (!ring || ring.lastBin < 0) { ctx.clearRect(0, 0, W, H); drawn.lastBin = -1; return; }
  const { cols, nch, lastBin, spc } = ring;
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
  drawColumns(pix, x0, n, n, H, sc);
  ctx.putImageData(strip, x0, 0);
  if (full && W > n) ctx.clearRect(n, 0, W - n, H);
  drawn = { lastBin, scale: sc, W, H };
  drawOverlay(W, H, sc);
}

/// Labels, event markers and the time axis, on their own canvas above the trace.
function drawOverlay(W, H, sc) {
  const { cols, nch, lastBin, spc } = ring;
  const lane = H / nch;
  octx.clearRect(0, 0, W, H);
  octx.font = "11px system-ui, sans-serif";
  if (lane >= 10) {
    for (let c = 0; c < nch; c++) {
      const u = ring.units[c] ? ` ${ring.units[c]}` : "";
      const range = eachScale && Number.isFinite(sc.lo[c]) ? `  ${fmtValue(sc.lo[c])} to ${fmtValue(sc.hi[c])}${u}` : "";
      const text = ring.names[c] + (ring.units[c] && !range ? ` (${ring.units[c]})` : "") + range;
      octx.fillStyle = "rgba(255,255,255,0.8)";
      octx.fillRect(2, lane * c + 1, octx.measureText(text).width + 4, 13);
      octx.fillStyle = "#4b5563";
      octx.fillText(text, 4, lane * c + 11);
    }
  }
  // events at their samples
  octx.strokeStyle = "#c0262d"; octx.fillStyle = "#c0262d";
  for (const e of state.events) {
    const b = Math.floor(e.sample / spc);
    if (lastBin - b >= cols || b > lastBin) continue;
    const x = cols - 1 - (lastBin - b) + 0.5;
    octx.beginPath(); octx.moveTo(x, 0); octx.lineTo(x, H); octx.stroke();
    octx.fillText(`${e.kind} ${e.value}`.slice(0, 40), Math.min(x + 3, W - 120), H - 6);
  }
  // time axis: seconds before the newest sample
  const secs = (cols * spc) / (ring.rate > 0 ? ring.rate : 1000);
  octx.fillStyle = "#6b7280";
  octx.fillText(`−${secs.toPrecision(3)} s`, 4, H - 20);
  octx.fillText("now", W - 28, H - 20);
  const perf = state.latencies.slice(-300).sort((a, b) => a - b);
  const p = (q) => perf.length ? perf[Math.min(perf.length - 1, Math.round(q * (perf.length - 1)))].toFixed(1) : "–";
  $("perf").textContent = `${fps().toFixed(0)} frames/s · commit to screen p50 ${p(0.5)} ms, p99 ${p(0.99)} ms · ${eachScale ? "each channel fitted" : `±${fmtValue(sc.half[0] / gain)} ${ring.units[0] || ""} a lane`}`;
}

const frameTimes = [];
function fps() {
  const now = performance.now();
  frameTimes.push(now);
  while (frameTimes.length && now - frameTimes[0] > 1000) frameTimes.shift();
  return frameTimes.length;
}

// ---------------------------------------------------------------- histogram
let histTimer = null;
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
  const dpr = window.devicePixelRatio || 1;
  canvas.style.height = "480px";
  const W = canvas.width = columns(), H = canvas.height = Math.round(480 * dpr);
  ctx.clearRect(0, 0, W, H);
  octx.clearRect(0, 0, overlay.width, overlay.height);
  drawn.lastBin = -1;
  const L = 50, R = 10, T = 24, B = 36;
  const x = (v) => {
    const lo = h.edges[0], hi = h.edges[h.edges.length - 1];
    const f = h.log ? (Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo) || 1) : (v - lo) / ((hi - lo) || 1);
    return L + f * (W - L - R);
  };
  const top = Math.max(...h.counts, 1);
  // a log count axis: a single millisecond sample in a tail still shows
  const y = (c) => c <= 0 ? H - B : H - B - (Math.log10(c + 1) / Math.log10(top + 1)) * (H - B - T);
  // the colours of the PNG histograms the tools write (rtloop-metrics' charts)
  ctx.fillStyle = "rgb(31,119,180)";
  h.counts.forEach((c, i) => {
    if (c === 0) return;
    const x0 = x(h.edges[i]), x1 = x(h.edges[i + 1]);
    ctx.fillRect(x0, y(c), Math.max(1, x1 - x0 - 0.5), H - B - y(c));
  });
  ctx.strokeStyle = "#9aa1ad"; ctx.beginPath(); ctx.moveTo(L, H - B); ctx.lineTo(W - R, H - B); ctx.stroke();
  ctx.fillStyle = "#1d2330"; ctx.font = "11px system-ui, sans-serif";
  const ticks = h.log
    ? Array.from({ length: 30 }, (_, i) => 10 ** (Math.floor(Math.log10(h.edges[0])) + i)).filter((t) => t >= h.edges[0] && t <= h.edges[h.edges.length - 1])
    : Array.from({ length: 6 }, (_, i) => h.edges[0] + (i / 5) * (h.edges[h.edges.length - 1] - h.edges[0]));
  for (const t of ticks) { ctx.fillText(fmtValue(t), x(t) - 10, H - B + 14); }
  const unit = (state.units || [])[h.channel];
  if (unit) ctx.fillText(unit, W - R - 20, H - B + 28);
  const marks = [["p50", h.p50, "rgb(44,160,44)"], ["p99", h.p99, "rgb(255,127,14)"], ["p99.9", h.p999, "rgb(214,39,40)"]];
  marks.forEach(([name, v, col], i) => {
    ctx.strokeStyle = col; ctx.fillStyle = col;
    ctx.beginPath(); ctx.moveTo(x(v), T); ctx.lineTo(x(v), H - B); ctx.stroke();
    ctx.fillText(`${name} ${fmtValue(v)}`, Math.min(x(v) + 3, W - 90), T + 14 * i);
  });
  const s = state.streams.find((q) => q.name === state.selected);
  $("perf").textContent = `${h.n} samples · min ${fmtValue(h.min)} · p50 ${fmtValue(h.p50)} · p99 ${fmtValue(h.p99)} · p99.9 ${fmtValue(h.p999)} · max ${fmtValue(h.max)}${h.log ? " · log axis" : ""}`;
  $("panel-title").textContent = `${state.selected}${s ? " · " + s.dtype : ""} · histogram of the newest samples`;
}

// ---------------------------------------------------------------- controls
async function select(name) {
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
$("hist-channel").onchange = () => refreshHistogram();
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
