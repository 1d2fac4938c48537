//! The two bridges: an LSL outlet becomes an rtloop stream (`lsl_in`), an rtloop stream
//! becomes an LSL outlet (`lsl_out`). Metadata (name, type, source id, rate, channel labels
//! and units) maps both ways; timestamps map between LSL's clock and CLOCK_MONOTONIC (the
//! same clock on Linux) with the inlet's time correction applied and recorded as an event.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtloop_stream::{DType, Event, EventValue, ReadError, ReaderMode, Stream, StreamConfig};

use crate::ffi::format;
use crate::io::{Inlet, Outlet, OutletSpec};
use crate::{Lsl, LslError, Meta};

/// The rtloop dtype of an LSL channel format (strings become events).
#[must_use]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// Times the outlet went silent for 2 s (it vanished or stalled; LSL recovery
    /// reconnects when it returns).
    pub outages: u64,
}

fn to_ns(seconds: f64) -> u64 {
    if seconds > 0.0 {
        (seconds * 1e9) as u64
    } else {
        0
    }
}

/// A stream name from an LSL name (characters a stream name may not hold become `_`).
#[must_use]
pub fn sanitize(name: &str) -> String {
    rtloop_stream::sanitize_name(name, "lsl")
}

/// An LSL outlet on the network becomes an rtloop stream, until `stop` (or the duration).
/// `ready` is called once the stream exists and the inlet is open.
pub fn lsl_in(
    lsl: &Arc<Lsl>,
    o: &InOptions,
    stop: &AtomicBool,
    ready: &mut dyn FnMut(&Meta, &str),
) -> Result<Report, LslError> {
    let mut inlet = Inlet::open(lsl.clone(), &o.query, o.by.as_deref(), o.timeout, &|| {
        stop.load(Ordering::Relaxed)
    })?;
    let meta = inlet.meta.clone();
    let strings = inlet.dtype.is_none();
    // markers: one sample (its local LSL time, seconds) + one event per marker
    let (dtype, n_ch) = match inlet.dtype {
        Some(d) => (d, meta.channels),
        None => (DType::F64, 1),
    };
    let name = o.stream.clone().unwrap_or_else(|| sanitize(&meta.name));
    let capacity = o
        .capacity
        .unwrap_or_else(|| ((meta.rate * 10.0) as u64).max(65536));
    let mut cfg = StreamConfig::new(dtype, n_ch, meta.rate, capacity);
    if !strings && meta.labels.len() == n_ch {
        cfg.ch_names = meta.labels.clone();
        cfg.ch_units = meta.units.clone();
    }
    // LSL's type and source id become the stream's, so `rtloop.resolve_streams(type=...)`
    // finds a bridged stream as pylsl's resolve_byprop finds the outlet (cut to what fits)
    cfg.content_type = truncate_utf8(&meta.kind, rtloop_stream::CONTENT_TYPE_MAX);
    cfg.source_id = truncate_utf8(&meta.source_id, rtloop_stream::SOURCE_ID_MAX);
    // `--keep`: the stream outlives the bridge's clean close
    cfg.keep = !o.remove_at_end;
    let stream = Stream::create(&name, &cfg)
        .map_err(|e| LslError::stream(format!("cannot create stream {name:?}"), e))?;
    let mut writer = stream
        .writer()
        .map_err(|e| LslError::stream(format!("cannot write stream {name:?}"), e))?;
    let mut report = Report {
        lsl: meta.to_string(),
        stream: name.clone(),
        ..Report::default()
    };
    let correction = |report: &mut Report, writer: &mut rtloop_stream::Writer, inlet: &Inlet| {
        if let Some(c) = inlet.time_correction(2.0) {
            report.time_correction = c;
            let ev = Event::new("lsl_time_correction", EventValue::f64(c), writer.written());
            let _ = writer.push_event(&ev);
        }
    };
    correction(&mut report, &mut writer, &inlet);
    ready(&meta, &name);
    let started = Instant::now();
    let (mut last_corr, mut last_data, mut silent) = (Instant::now(), Instant::now(), false);
    let chunk = 4096usize;
    // u64 backing: aligned for every dtype
    let mut data = vec![0u64; chunk * n_ch];
    let mut ts = vec![0f64; chunk];
    while !stop.load(Ordering::Relaxed) && o.duration.is_none_or(|d| started.elapsed() < d) {
        let got = if strings {
            match inlet.pull_string(0.1) {
                Some((t, text)) => {
                    let local = t + report.time_correction;
                    let at = writer.written();
                    writer
                        .write_bytes(&local.to_ne_bytes(), Some(to_ns(local)))
                        .map_err(|e| LslError::stream(format!("stream {name:?}"), e))?;
                    // the marker's own time (LSL's, corrected to the local clock), not the
                    // moment it reached the bridge
                    let ev = Event::new(meta.kind.as_str(), text.as_str(), at);
                    writer
                        .push_event_stamped(&ev, Some(to_ns(local)))
                        .map_err(|e| LslError::stream(format!("stream {name:?}"), e))?;
                    report.samples += 1;
                    report.events += 1;
                    1
                }
                None => 0,
            }
        } else {
            let bytes = bytemuck_u8(&mut data);
            let n = inlet.pull(bytes, &mut ts, chunk, 0.1)?;
            let sb = n_ch * dtype.itemsize();
            for (i, t) in ts[..n].iter().enumerate() {
                let local = t + report.time_correction;
                writer
                    .write_bytes(&bytes[i * sb..(i + 1) * sb], Some(to_ns(local)))
                    .map_err(|e| LslError::stream(format!("stream {name:?}"), e))?;
            }
            report.samples += n as u64;
            n
        };
        if got > 0 {
            if silent {
                tracing::warn!("LSL outlet {meta} is back (LSL recovery); bridging again");
                silent = false;
            }
            last_data = Instant::now();
        } else if !silent && meta.rate > 0.0 && last_data.elapsed() > Duration::from_secs(2) {
            tracing::warn!(
                "no data from LSL outlet {meta} for 2 s: it vanished or stalled; waiting for it \
                 to come back with the same source id (what was received stays in stream {name:?})"
            );
            silent = true;
            report.outages += 1;
        }
        if last_corr.elapsed() > Duration::from_secs(5) {
            last_corr = Instant::now();
            correction(&mut report, &mut writer, &inlet);
        }
    }
    drop(writer);
    if o.remove_at_end {
        let _ = Stream::remove(&name);
    }
    Ok(report)
}

/// The bytes of a `u64` buffer (an 8-aligned byte buffer for every dtype).
pub(crate) fn bytemuck_u8(v: &mut [u64]) -> &mut [u8] {
    // SAFETY: u64 has no padding and every byte pattern is a valid u8; the length is the
    // same memory in bytes, and the borrow is carried over.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
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
    lsl: &Arc<Lsl>,
    o: &OutOptions,
    stop: &AtomicBool,
    ready: &mut dyn FnMut(&Meta),
) -> Result<Report, LslError> {
    let stream = Stream::open(&o.stream)
        .map_err(|e| LslError::stream(format!("cannot open stream {:?}", o.stream), e))?;
    let info = stream.info().clone();
    format_of(info.dtype)
        .map_err(|e| LslError::Unmappable(format!("stream {:?}: {e}", o.stream)))?;
    let name = o.name.clone().unwrap_or_else(|| o.stream.clone());
    let source = o.source_id.clone().unwrap_or_else(|| {
        if info.source_id.is_empty() {
            format!("rtloop:{}", o.stream)
        } else {
            info.source_id.clone()
        }
    });
    let outlet = Outlet::create(
        lsl.clone(),
        &OutletSpec {
            name: name.clone(),
            // the stream's own content type unless told otherwise; EEG when it has none
            kind: o.kind.clone().unwrap_or_else(|| {
                if info.content_type.is_empty() {
                    "EEG".into()
                } else {
                    info.content_type.clone()
                }
            }),
            source_id: source.clone(),
            channels: info.n_channels,
            rate: info.nominal_rate,
            dtype: Some(info.dtype),
            labels: info.ch_names.clone(),
            units: info.ch_units.clone(),
        },
    )?;
    let markers = Outlet::create(
        lsl.clone(),
        &OutletSpec {
            name: format!("{name}-markers"),
            kind: "Markers".into(),
            source_id: format!("{source}-markers"),
            channels: 1,
            rate: 0.0,
            dtype: None,
            labels: Vec::new(),
            units: Vec::new(),
        },
    )?;
    let mut reader = stream
        .reader(ReaderMode::Latest)
        .map_err(|e| LslError::stream(format!("cannot read stream {:?}", o.stream), e))?;
    ready(&outlet.meta);
    let mut report = Report {
        lsl: outlet.meta.to_string(),
        stream: o.stream.clone(),
        ..Report::default()
    };
    let sb = info.sample_bytes;
    let chunk = ((1 << 20) / sb).clamp(1, 8192);
    let mut buf = vec![0u64; (chunk * sb).div_ceil(8)];
    let mut stamps = vec![0u64; chunk];
    let mut ts = vec![0f64; chunk];
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) && o.duration.is_none_or(|d| started.elapsed() < d) {
        let bytes = &mut bytemuck_u8(&mut buf)[..chunk * sb];
        match reader.pull_into(bytes, Some(&mut stamps), chunk) {
            Ok(p) if p.n > 0 => {
                // each sample's own time, as an LSL outlet back-dates a chunk
                reader.sample_times(p.first + p.n as u64, &mut stamps[..p.n]);
                for (t, s) in ts.iter_mut().zip(&stamps[..p.n]) {
                    *t = *s as f64 / 1e9;
                }
                outlet.push(&bytes[..p.n * sb], &ts[..p.n])?;
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
                reader
                    .seek(oldest)
                    .map_err(|e| LslError::stream(format!("stream {:?}", o.stream), e))?;
            }
            Err(e) => return Err(LslError::stream(format!("stream {:?}", o.stream), e)),
        }
        if let Ok(evs) = reader.pull_events() {
            for e in evs {
                let text = match e.value.as_text() {
                    Some(t) => t.to_string(),
                    None => format!("{:?}", e.value.to_f64s().unwrap_or_default()),
                };
                markers.push_string(&text, e.stamp_ns as f64 / 1e9);
                report.events += 1;
            }
        }
    }
    Ok(report)
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn truncate_utf8(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].replace('\0', "")
}
