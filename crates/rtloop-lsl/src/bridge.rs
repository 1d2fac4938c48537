//! The two bridges: an LSL outlet becomes an rtloop stream (`lsl_in`), an rtloop stream
//! becomes an LSL outlet (`lsl_out`). Metadata (name, type, source id, rate, channel labels
//! and units) maps both ways; timestamps map between LSL's clock and CLOCK_MONOTONIC (the
//! same clock on Linux) with the inlet's time correction applied and recorded as an event.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rtloop_stream::{DType, Event, EventValue, ReadError, ReaderMode, Stream, StreamConfig};

use crate::ffi::{self, format};
use crate::{cstr, Lsl, LslError, Meta};

/// The rtloop dtype of an LSL channel format (strings become events).
pub fn dtype_of(format: i32) -> Option<DType> {
    match format {
        format::FLOAT32 => Some(DType::F32),
        format::DOUBLE64 => Some(DType::F64),
        format::INT32 => Some(DType::I32),
        format::INT16 => Some(DType::I16),
        format::INT8 => Some(DType::I8),
        format::INT64 => Some(DType::I64),
        _ => None,
    }
}

/// The LSL channel format of an rtloop dtype, or why there is none.
pub fn format_of(d: DType) -> Result<i32, LslError> {
    Ok(match d {
        DType::F32 => format::FLOAT32,
        DType::F64 => format::DOUBLE64,
        DType::I32 => format::INT32,
        DType::I16 => format::INT16,
        DType::I8 => format::INT8,
        DType::I64 => format::INT64,
        other => {
            return Err(LslError::Unmappable(format!(
                "{other} has no LSL channel format (LSL carries float32, double64, int8, int16, \
                 int32, int64 and strings); convert the stream or bridge a converted copy"
            )))
        }
    })
}

/// Options of [`lsl_in`].
#[derive(Debug, Clone)]
pub struct InOptions {
    /// Outlet name, or type (tried second unless `by` says which).
    pub query: String,
    /// `Some("name")` / `Some("type")`: match only that property.
    pub by: Option<String>,
    /// The rtloop stream to create (default: the outlet's name).
    pub stream: Option<String>,
    /// Seconds to wait for the outlet.
    pub timeout: f64,
    /// Samples the stream keeps (default: 10 s of data, at least 65536).
    pub capacity: Option<u64>,
    /// Stop after this long (None: until `stop`).
    pub duration: Option<Duration>,
    /// Remove the stream when done.
    pub remove_at_end: bool,
}

/// What a bridge moved.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// The LSL side.
    pub lsl: String,
    /// The rtloop stream.
    pub stream: String,
    /// Samples moved.
    pub samples: u64,
    /// Markers (events) moved.
    pub events: u64,
    /// Time correction (remote LSL clock → local) last applied, seconds.
    pub time_correction: f64,
    /// Times the outlet went silent and came back (LSL recovery).
    pub outages: u64,
}

fn ec_err(what: &str, ec: i32) -> LslError {
    LslError::Other(format!(
        "liblsl {what}: error {ec} ({})",
        match ec {
            -1 => "timeout",
            -2 => "stream lost",
            -3 => "invalid argument",
            -4 => "internal error",
            _ => "unknown",
        }
    ))
}

/// An LSL outlet on the network becomes an rtloop stream, until `stop` (or the duration).
/// `ready` is called once the stream exists and the inlet is open.
pub fn lsl_in(
    lsl: &Lsl,
    o: &InOptions,
    stop: &AtomicBool,
    ready: &mut dyn FnMut(&Meta, &str),
) -> Result<Report, LslError> {
    let a = lsl.api();
    let props: Vec<&str> = match o.by.as_deref() {
        Some(p) => vec![p],
        None => vec!["name", "type"],
    };
    let deadline = Instant::now() + Duration::from_secs_f64(o.timeout);
    let mut found = None;
    'search: while Instant::now() < deadline {
        for p in &props {
            let left = deadline
                .saturating_duration_since(Instant::now())
                .as_secs_f64();
            if let Some(i) = lsl.resolve_one(p, &o.query, (left / props.len() as f64).min(1.0)) {
                found = Some(i);
                break 'search;
            }
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    let Some(info) = found else {
        let seen = lsl.resolve_all(0.5);
        return Err(LslError::NoOutlet {
            prop: props.join(" or "),
            value: o.query.clone(),
            timeout: o.timeout,
            found: if seen.is_empty() {
                "none".into()
            } else {
                seen.iter()
                    .map(Meta::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        });
    };
    // SAFETY: `info` came from resolve; the inlet takes its own copy (max buffer 360 s,
    // default chunking, recover = 1: reconnect to the same source id after an outage).
    let inlet = unsafe { (a.lsl_create_inlet)(info, 360, 0, 1) };
    lsl.destroy_info(info);
    if inlet.is_null() {
        return Err(LslError::Other("liblsl could not create an inlet".into()));
    }
    let inlet = InletGuard(lsl, inlet);
    let mut ec = 0;
    // SAFETY: a live inlet; `ec` receives the error code.
    let full = unsafe { (a.lsl_get_fullinfo)(inlet.1, o.timeout.max(1.0), &mut ec) };
    if ec != 0 || full.is_null() {
        return Err(ec_err("get_fullinfo", ec));
    }
    let meta = lsl.meta(full);
    lsl.destroy_info(full);
    if meta.channels == 0 {
        return Err(LslError::Unmappable(format!("{meta} has no channels")));
    }
    let strings = meta.format == format::STRING;
    let dtype = if strings {
        DType::F64
    } else {
        dtype_of(meta.format).ok_or_else(|| {
            LslError::Unmappable(format!(
                "{meta}: channel format {} has no rtloop dtype",
                meta.format
            ))
        })?
    };
    // markers: one sample (its LSL time, local clock, seconds) + one event per marker
    let n_ch = if strings { 1 } else { meta.channels };
    let name = o.stream.clone().unwrap_or_else(|| sanitize(&meta.name));
    let capacity = o
        .capacity
        .unwrap_or_else(|| ((meta.rate * 10.0) as u64).max(65536));
    let mut cfg = StreamConfig::new(dtype, n_ch, meta.rate, capacity);
    if !strings && meta.labels.len() == n_ch {
        cfg.ch_names = meta.labels.clone();
        cfg.ch_units = meta.units.clone();
    }
    let stream = Stream::create(&name, &cfg)
        .map_err(|e| LslError::Other(format!("cannot create stream {name:?}: {e}")))?;
    let mut writer = stream
        .writer()
        .map_err(|e| LslError::Other(e.to_string()))?;
    // SAFETY: a live inlet.
    unsafe { (a.lsl_open_stream)(inlet.1, o.timeout.max(1.0), &mut ec) };
    if ec != 0 {
        return Err(ec_err("open_stream", ec));
    }
    let mut report = Report {
        lsl: meta.to_string(),
        stream: name.clone(),
        ..Report::default()
    };
    let correction = |report: &mut Report, writer: &mut rtloop_stream::Writer| {
        let mut ec = 0;
        // SAFETY: a live inlet.
        let c = unsafe { (a.lsl_time_correction)(inlet.1, 2.0, &mut ec) };
        if ec == 0 && c.is_finite() {
            report.time_correction = c;
            let ev = Event::new("lsl_time_correction", EventValue::f64(c), writer.written());
            let _ = writer.push_event(&ev);
        }
    };
    correction(&mut report, &mut writer);
    ready(&meta, &name);
    let started = Instant::now();
    let mut last_corr = Instant::now();
    let mut last_data = Instant::now();
    let mut silent = false;
    let chunk = 4096usize;
    let mut data = vec![0u8; chunk * n_ch * 8];
    let mut ts = vec![0f64; chunk];
    while !stop.load(Ordering::Relaxed) && o.duration.is_none_or(|d| started.elapsed() < d) {
        let got = if strings {
            let mut p: *mut std::ffi::c_char = std::ptr::null_mut();
            let mut ec = 0;
            // SAFETY: a live inlet; one string slot; liblsl allocates the string, freed below.
            let t = unsafe { (a.lsl_pull_sample_str)(inlet.1, &mut p, 1, 0.1, &mut ec) };
            if t != 0.0 && !p.is_null() {
                // SAFETY: a NUL-terminated string from liblsl, copied then destroyed once.
                let text = unsafe { std::ffi::CStr::from_ptr(p) }
                    .to_string_lossy()
                    .into_owned();
                // SAFETY: as above.
                unsafe { (a.lsl_destroy_string)(p) };
                let local = t + report.time_correction;
                let at = writer.written();
                writer
                    .write_bytes(&local.to_ne_bytes(), Some(to_ns(local)))
                    .map_err(|e| LslError::Other(e.to_string()))?;
                let ev = Event::new(meta.kind.as_str(), text.as_str(), at);
                writer
                    .push_event(&ev)
                    .map_err(|e| LslError::Other(e.to_string()))?;
                report.events += 1;
                1
            } else {
                0
            }
        } else {
            let n = pull(a, inlet.1, meta.format, &mut data, &mut ts, n_ch, chunk)?;
            let sb = n_ch * dtype.itemsize();
            for (i, t) in ts[..n].iter().enumerate() {
                let local = t + report.time_correction;
                writer
                    .write_bytes(&data[i * sb..(i + 1) * sb], Some(to_ns(local)))
                    .map_err(|e| LslError::Other(e.to_string()))?;
            }
            report.samples += n as u64;
            n
        };
        if got > 0 {
            if silent {
                tracing::warn!("LSL outlet {} is back (LSL recovery); bridging again", meta);
                silent = false;
            }
            last_data = Instant::now();
        } else if !silent && meta.rate > 0.0 && last_data.elapsed() > Duration::from_secs(2) {
            tracing::warn!(
                "no data from LSL outlet {} for 2 s: it vanished or stalled; waiting for it to \
                 come back with the same source id (what was received stays in stream {name:?})",
                meta
            );
            silent = true;
            report.outages += 1;
        }
        if last_corr.elapsed() > Duration::from_secs(5) {
            last_corr = Instant::now();
            correction(&mut report, &mut writer);
        }
    }
    drop(writer);
    if o.remove_at_end {
        let _ = Stream::remove(&name);
    }
    Ok(report)
}

fn to_ns(seconds: f64) -> u64 {
    if seconds > 0.0 {
        (seconds * 1e9) as u64
    } else {
        0
    }
}

/// Pull up to `chunk` samples (0.1 s timeout) into `data` (native bytes) and `ts`.
fn pull(
    a: &ffi::Api,
    inlet: ffi::Inlet,
    fmt: i32,
    data: &mut [u8],
    ts: &mut [f64],
    n_ch: usize,
    chunk: usize,
) -> Result<usize, LslError> {
    let mut ec = 0;
    let elems = (chunk * n_ch) as std::ffi::c_ulong;
    let tse = chunk as std::ffi::c_ulong;
    let p = data.as_mut_ptr();
    let t = ts.as_mut_ptr();
    // SAFETY: `data` holds chunk*n_ch values of up to 8 bytes (aligned: a Vec<u8> from the
    // allocator is at least 8-aligned for this size), `ts` chunk f64s; liblsl writes at
    // most the element counts it is given.
    let n = unsafe {
        match fmt {
            format::FLOAT32 => (a.lsl_pull_chunk_f)(inlet, p.cast(), t, elems, tse, 0.1, &mut ec),
            format::DOUBLE64 => (a.lsl_pull_chunk_d)(inlet, p.cast(), t, elems, tse, 0.1, &mut ec),
            format::INT32 => (a.lsl_pull_chunk_i)(inlet, p.cast(), t, elems, tse, 0.1, &mut ec),
            format::INT16 => (a.lsl_pull_chunk_s)(inlet, p.cast(), t, elems, tse, 0.1, &mut ec),
            format::INT8 => (a.lsl_pull_chunk_c)(inlet, p.cast(), t, elems, tse, 0.1, &mut ec),
            _ => (a.lsl_pull_chunk_l)(inlet, p.cast(), t, elems, tse, 0.1, &mut ec),
        }
    };
    // -1 timeout and -2 lost (recover handles it) are not errors here
    if ec != 0 && ec != -1 && ec != -2 {
        return Err(ec_err("pull_chunk", ec));
    }
    Ok(n as usize / n_ch)
}

struct InletGuard<'a>(&'a Lsl, ffi::Inlet);
impl Drop for InletGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the inlet we created, destroyed once.
        unsafe { (self.0.api().lsl_destroy_inlet)(self.1) };
    }
}

struct OutletGuard<'a>(&'a Lsl, ffi::Outlet);
impl Drop for OutletGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the outlet we created, destroyed once.
        unsafe { (self.0.api().lsl_destroy_outlet)(self.1) };
    }
}

/// A stream name from an LSL name (characters a stream name may not hold become `_`).
#[must_use]
pub fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_-.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("lsl{s}")
    } else {
        s
    }
}

/// Options of [`lsl_out`].
#[derive(Debug, Clone)]
pub struct OutOptions {
    /// The rtloop stream.
    pub stream: String,
    /// Outlet name (default: the stream's name).
    pub name: Option<String>,
    /// Content type (default `EEG`).
    pub kind: Option<String>,
    /// Source id (default `rtloop:<stream>`).
    pub source_id: Option<String>,
    /// Stop after this long.
    pub duration: Option<Duration>,
}

/// An rtloop stream becomes an LSL outlet (its samples with their CLOCK_MONOTONIC stamps as
/// LSL timestamps; its events as a second, `Markers` outlet named `<name>-markers`).
pub fn lsl_out(
    lsl: &Lsl,
    o: &OutOptions,
    stop: &AtomicBool,
    ready: &mut dyn FnMut(&Meta),
) -> Result<Report, LslError> {
    let a = lsl.api();
    let stream = Stream::open(&o.stream)
        .map_err(|e| LslError::Other(format!("cannot open stream {:?}: {e}", o.stream)))?;
    let info = stream.info().clone();
    let fmt = format_of(info.dtype)
        .map_err(|e| LslError::Unmappable(format!("stream {:?}: {e}", o.stream)))?;
    let name = o.name.clone().unwrap_or_else(|| o.stream.clone());
    let kind = o.kind.clone().unwrap_or_else(|| "EEG".into());
    let source = o
        .source_id
        .clone()
        .unwrap_or_else(|| format!("rtloop:{}", o.stream));
    let (cn, ck, cs) = (cstr(&name), cstr(&kind), cstr(&source));
    // SAFETY: NUL-terminated strings that live for the call; the info is ours.
    let si = unsafe {
        (a.lsl_create_streaminfo)(
            cn.as_ptr(),
            ck.as_ptr(),
            info.n_channels as i32,
            info.nominal_rate,
            fmt,
            cs.as_ptr(),
        )
    };
    if si.is_null() {
        return Err(LslError::Other(
            "liblsl could not create a stream info".into(),
        ));
    }
    let (c_channels, c_channel, c_label, c_unit, c_acq, c_man, c_rt) = (
        cstr("channels"),
        cstr("channel"),
        cstr("label"),
        cstr("unit"),
        cstr("acquisition"),
        cstr("manufacturer"),
        cstr("rtloop"),
    );
    // SAFETY: building the info's description with liblsl's XML calls on nodes it returned;
    // every string is NUL-terminated and lives for its call.
    unsafe {
        let desc = (a.lsl_get_desc)(si);
        let chans = (a.lsl_append_child)(desc, c_channels.as_ptr());
        for i in 0..info.n_channels {
            let ch = (a.lsl_append_child)(chans, c_channel.as_ptr());
            let label = cstr(info.ch_names.get(i).map_or("", String::as_str));
            (a.lsl_append_child_value)(ch, c_label.as_ptr(), label.as_ptr());
            if let Some(u) = info.ch_units.get(i).filter(|u| !u.is_empty()) {
                let u = cstr(u);
                (a.lsl_append_child_value)(ch, c_unit.as_ptr(), u.as_ptr());
            }
        }
        let acq = (a.lsl_append_child)(desc, c_acq.as_ptr());
        (a.lsl_append_child_value)(acq, c_man.as_ptr(), c_rt.as_ptr());
    }
    let meta = lsl.meta(si);
    // SAFETY: the info is complete; the outlet copies it (chunk size 0 = as pushed,
    // 360 s buffered for slow inlets).
    let outlet = unsafe { (a.lsl_create_outlet)(si, 0, 360) };
    lsl.destroy_info(si);
    if outlet.is_null() {
        return Err(LslError::Other("liblsl could not create an outlet".into()));
    }
    let outlet = OutletGuard(lsl, outlet);
    // markers outlet for events
    let mname = cstr(&format!("{name}-markers"));
    let (mk, msrc) = (cstr("Markers"), cstr(&format!("{source}-markers")));
    // SAFETY: as above, a string-format irregular stream of one channel.
    let msi = unsafe {
        (a.lsl_create_streaminfo)(
            mname.as_ptr(),
            mk.as_ptr(),
            1,
            0.0,
            format::STRING,
            msrc.as_ptr(),
        )
    };
    // SAFETY: as above.
    let moutlet = unsafe { (a.lsl_create_outlet)(msi, 0, 360) };
    lsl.destroy_info(msi);
    let moutlet = OutletGuard(lsl, moutlet);
    let mut reader = stream
        .reader(ReaderMode::Latest)
        .map_err(|e| LslError::Other(e.to_string()))?;
    ready(&meta);
    let mut report = Report {
        lsl: meta.to_string(),
        stream: o.stream.clone(),
        ..Report::default()
    };
    let sb = info.sample_bytes;
    let chunk = ((1 << 20) / sb).clamp(1, 8192);
    let mut buf = vec![0u8; chunk * sb];
    let mut stamps = vec![0u64; chunk];
    let mut ts = vec![0f64; chunk];
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) && o.duration.is_none_or(|d| started.elapsed() < d) {
        match reader.pull_into(&mut buf, Some(&mut stamps), chunk) {
            Ok(p) if p.n > 0 => {
                for (t, s) in ts.iter_mut().zip(&stamps[..p.n]) {
                    *t = *s as f64 / 1e9;
                }
                let elems = (p.n * info.n_channels) as std::ffi::c_ulong;
                let (d, t) = (buf.as_ptr(), ts.as_ptr());
                // SAFETY: `buf` holds p.n samples of the stream's dtype (matching `fmt`),
                // `ts` one timestamp per sample; liblsl copies them.
                let rc = unsafe {
                    match fmt {
                        format::FLOAT32 => (a.lsl_push_chunk_ftnp)(outlet.1, d.cast(), elems, t, 1),
                        format::DOUBLE64 => {
                            (a.lsl_push_chunk_dtnp)(outlet.1, d.cast(), elems, t, 1)
                        }
                        format::INT32 => (a.lsl_push_chunk_itnp)(outlet.1, d.cast(), elems, t, 1),
                        format::INT16 => (a.lsl_push_chunk_stnp)(outlet.1, d.cast(), elems, t, 1),
                        format::INT8 => (a.lsl_push_chunk_ctnp)(outlet.1, d.cast(), elems, t, 1),
                        _ => (a.lsl_push_chunk_ltnp)(outlet.1, d.cast(), elems, t, 1),
                    }
                };
                if rc != 0 {
                    return Err(ec_err("push_chunk", rc));
                }
                report.samples += p.n as u64;
            }
            Ok(_) => {
                let _ = reader.wait_available(1, Some(Duration::from_millis(50)));
            }
            Err(ReadError::Overrun { lost, oldest }) => {
                tracing::warn!(
                    "lsl-out: {lost} samples of {:?} overwritten before they were sent",
                    o.stream
                );
                reader.seek(oldest);
            }
            Err(e) => return Err(LslError::Other(format!("stream {:?}: {e}", o.stream))),
        }
        if let Ok(evs) = reader.pull_events() {
            for e in evs {
                let text = match e.value.as_text() {
                    Some(t) => t.to_string(),
                    None => format!("{:?}", e.value.to_f64s().unwrap_or_default()),
                };
                let c = cstr(&text);
                let ptrs = [c.as_ptr()];
                let t = e.stamp_ns as f64 / 1e9;
                // SAFETY: one NUL-terminated string for the one channel; liblsl copies it.
                unsafe { (a.lsl_push_sample_strtp)(moutlet.1, ptrs.as_ptr(), t, 1) };
                report.events += 1;
            }
        }
    }
    Ok(report)
}
