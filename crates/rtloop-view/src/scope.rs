//! The scope's decimation, next to the ring: the newest samples of a stream reduced to a
//! minimum and a maximum per screen column (as Open Ephys' LFP viewer and mne-lsl draw), so
//! the page gets a few kilobytes per frame whatever the stream's rate and channel count.
//!
//! Columns are fixed bins of sample indices (`bin = sample / samples_per_column`), so each
//! frame only decimates the samples committed since the last one and sends the bins they
//! touched; the page keeps the rest. Reads go through the stream handle, without a reader
//! slot: the viewer is never a slow reader that a lossless writer waits for, and copies only
//! what it has not seen.

use rtloop_stream::{DType, Event, EventValue, ReadError, Stream, StreamState};

/// What the scope shows.
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct ScopeConfig {
    /// Seconds of signal across the screen (0.1-30 s); for a stream without a nominal rate,
    /// thousands of samples.
    pub window_s: f64,
    /// Screen columns (the canvas width in pixels), 16-8192.
    pub columns: u32,
    /// First channel of the page shown.
    pub first_channel: usize,
    /// Channels on the page (1-1024).
    pub n_channels: usize,
}

/// A refusal of a scope configuration, saying what is allowed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ScopeError {
    /// The window is outside what a scope shows.
    #[error("window {0} s is outside 0.1-30 s")]
    Window(f64),
    /// Too few or too many columns.
    #[error("{0} columns is outside 16-8192")]
    Columns(u32),
    /// The channel page does not fit the stream.
    #[error("channels {first}..{end} are outside the stream's 0..{n_channels}")]
    Channels {
        /// First channel asked for.
        first: usize,
        /// One past the last.
        end: usize,
        /// Channels of the stream.
        n_channels: usize,
    },
}

/// Shortest and longest window, in seconds.
pub const WINDOW_RANGE: (f64, f64) = (0.1, 30.0);
/// Most samples decimated for one frame (a reset over a long window reads in slices of this).
const SLICE: u64 = 4096;

/// One event inside the scope's window.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ScopeEvent {
    /// Its place among the stream's events (0 for the first pushed): the page lists each
    /// event once however often a new configuration or connection sends it again.
    pub index: u64,
    /// Sample index it belongs to.
    pub sample: u64,
    /// Its type as text (or a number's text).
    pub kind: String,
    /// Its value as text.
    pub value: String,
}

/// Where the scope's stream is in its life, as the page says it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum ScopeStatus {
    /// A live writer holds it.
    Live {
        /// The writer's pid.
        pid: u32,
    },
    /// Made, no writer yet.
    Waiting,
    /// Its writer closed it: nothing more comes.
    Closed,
    /// Its writer's process ended without closing it.
    Dead {
        /// The writer's pid.
        pid: u32,
    },
    /// Its name was removed (or no longer leads to it) while a writer may still hold it:
    /// nobody new finds it.
    Removed,
    /// Its shared counters cannot be right (something else wrote into its file): nothing
    /// of it is shown.
    Damaged {
        /// Why.
        reason: String,
    },
}

impl ScopeStatus {
    /// Whether samples may still come.
    #[must_use]
    pub fn live(&self) -> bool {
        matches!(self, ScopeStatus::Live { .. } | ScopeStatus::Waiting)
    }
}

/// What changed since the last frame.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScopeFrame {
    /// Samples the writer had committed when this frame was read.
    pub written: u64,
    /// First bin in `data`.
    pub first_bin: u64,
    /// Bins in `data`; the last one may still be filling.
    pub n_bins: u32,
    /// Channels per bin.
    pub n_channels: u32,
    /// `[bin][channel][min, max]`.
    pub data: Vec<f32>,
    /// CLOCK_MONOTONIC ns of the newest sample's commit, when one was read.
    pub newest_stamp_ns: Option<u64>,
    /// Samples the writer overwrote before the scope read them (it skips them).
    pub skipped: u64,
    /// New events at or after the window's start.
    pub events: Vec<ScopeEvent>,
}

/// The decimation state of one scope on one stream.
pub struct Scope {
    stream: Stream,
    /// The name the scope was opened by: a new stream under it is followed.
    name: String,
    cfg: ScopeConfig,
    samples_per_column: u64,
    /// Next sample to decimate.
    next: u64,
    /// The bin being filled and its running minimum and maximum per shown channel.
    bin: Option<u64>,
    acc: Vec<[f32; 2]>,
    next_event: u64,
    /// Aligned for every dtype (u64), viewed as bytes and as samples.
    scratch: Vec<u64>,
    stamps: Vec<u64>,
    /// The status last given to the page.
    reported: Option<ScopeStatus>,
}

impl Scope {
    /// A scope over `stream` that starts with the newest window of samples.
    pub fn new(stream: Stream, cfg: ScopeConfig) -> Result<Self, ScopeError> {
        let info = stream.info();
        if !(WINDOW_RANGE.0..=WINDOW_RANGE.1).contains(&cfg.window_s) {
            return Err(ScopeError::Window(cfg.window_s));
        }
        if !(16..=8192).contains(&cfg.columns) {
            return Err(ScopeError::Columns(cfg.columns));
        }
        let end = cfg.first_channel.saturating_add(cfg.n_channels);
        if cfg.n_channels == 0 || cfg.n_channels > 1024 || end > info.n_channels {
            return Err(ScopeError::Channels {
                first: cfg.first_channel,
                end,
                n_channels: info.n_channels,
            });
        }
        let window = window_samples(cfg.window_s, info.nominal_rate);
        let samples_per_column = window.div_ceil(u64::from(cfg.columns)).max(1);
        let written = stream.written();
        // start a screen's width back (the window rounded up to whole columns), at a bin's
        // start, or at the oldest sample the ring keeps
        let start = written
            .saturating_sub(samples_per_column * u64::from(cfg.columns))
            .max(oldest_safe(written, info.capacity));
        let start = start - start % samples_per_column;
        let start = start.max(oldest_safe(written, info.capacity));
        let first_event = first_event_after(&stream, start);
        Ok(Scope {
            acc: vec![[f32::INFINITY, f32::NEG_INFINITY]; cfg.n_channels],
            name: stream.name().to_owned(),
            stream,
            cfg,
            samples_per_column,
            next: start,
            bin: None,
            next_event: first_event,
            scratch: Vec::new(),
            stamps: Vec::new(),
            reported: None,
        })
    }

    /// Samples per screen column.
    #[must_use]
    pub fn samples_per_column(&self) -> u64 {
        self.samples_per_column
    }

    /// The configuration shown.
    #[must_use]
    pub fn config(&self) -> ScopeConfig {
        self.cfg
    }

    /// The stream shown.
    #[must_use]
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Where the stream is in its life. An ended stream says how it ended; a stream whose
    /// name was removed (or taken by a newer stream) while its writer runs is `Removed`.
    #[must_use]
    pub fn status(&self) -> ScopeStatus {
        match StreamState::of(&self.stream) {
            StreamState::Damaged { reason } => ScopeStatus::Damaged { reason },
            StreamState::Closed => ScopeStatus::Closed,
            StreamState::Dead { pid } => ScopeStatus::Dead { pid },
            _ if !self.stream.is_current() => ScopeStatus::Removed,
            StreamState::Live { pid, .. } => ScopeStatus::Live { pid },
            _ => ScopeStatus::Waiting,
        }
    }

    /// The status, and whether it changed since the last call (the first call counts as a
    /// change): the page is told once per change.
    pub fn report_status(&mut self) -> (ScopeStatus, bool) {
        let now = self.status();
        let changed = self.reported.as_ref() != Some(&now);
        self.reported = Some(now.clone());
        (now, changed)
    }

    /// A key that tells this stream from an earlier or later one of the same name.
    #[must_use]
    pub fn incarnation(&self) -> String {
        let i = self.stream.info();
        format!("{}-{}", i.creator_pid, i.created_unix_ns)
    }

    /// When the scope's name now leads to another stream (a writer made it again), start
    /// over on that one with the same window and width; the channel page is kept when the
    /// new stream has those channels, else it starts at channel 0. Returns whether it did.
    pub fn follow(&mut self) -> bool {
        if self.stream.is_current() {
            return false;
        }
        let Ok(new) = Stream::open(&self.name) else {
            return false; // no stream under the name (yet)
        };
        let n = new.info().n_channels;
        let cfg = self.cfg;
        let fallback = ScopeConfig {
            first_channel: 0,
            n_channels: cfg.n_channels.min(n),
            ..cfg
        };
        let fits = cfg.first_channel + cfg.n_channels <= n;
        match Scope::new(new, if fits { cfg } else { fallback }) {
            Ok(s) => {
                *self = s;
                true
            }
            Err(_) => false,
        }
    }

    /// Decimate what was committed since the last frame (at most one window of it).
    pub fn frame(&mut self) -> ScopeFrame {
        let capacity = self.stream.info().capacity;
        let window = self.samples_per_column * u64::from(self.cfg.columns);
        let written = self.stream.written();
        let mut out = ScopeFrame {
            written,
            n_channels: self.cfg.n_channels as u32,
            ..ScopeFrame::default()
        };
        // never decimate more than the window (plus the bin in progress): older samples
        // would scroll off the screen at once
        let floor = written
            .saturating_sub(window + self.samples_per_column)
            .max(oldest_safe(written, capacity));
        if self.next < floor {
            out.skipped = floor - self.next;
            self.next = floor;
            self.bin = None;
        }
        let mut emitted_first: Option<u64> = None;
        while self.next < written {
            let end = written.min(self.next + SLICE);
            match self.read(self.next, end) {
                Ok(()) => {}
                Err(_) => {
                    // overwritten while we read: skip to what the ring still holds
                    let now = self.stream.written();
                    let safe = oldest_safe(now, capacity);
                    out.skipped += safe.saturating_sub(self.next);
                    self.next = safe.max(self.next + 1);
                    self.bin = None;
                    continue;
                }
            }
            out.newest_stamp_ns = self.stamps.last().copied().or(out.newest_stamp_ns);
            self.decimate(self.next, end, &mut out, &mut emitted_first);
            self.next = end;
        }
        // the bin being filled goes out too, so the newest samples show at once
        if let Some(b) = self.bin {
            if emitted_first.is_none() {
                emitted_first = Some(b);
            }
            push_bin(&mut out.data, &self.acc);
        }
        out.first_bin = emitted_first.unwrap_or(0);
        out.n_bins = (out.data.len() / (2 * self.cfg.n_channels)) as u32;
        out.events = self.new_events(written.saturating_sub(window));
        out
    }

    fn read(&mut self, first: u64, end: u64) -> Result<(), ReadError> {
        let info = self.stream.info();
        let n = (end - first) as usize;
        let bytes = n * info.sample_bytes;
        self.scratch.resize(bytes.div_ceil(8), 0);
        self.stamps.resize(n, 0);
        let buf = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut self.scratch)[..bytes];
        self.stream
            .read_into(first, end, buf, Some(&mut self.stamps))
    }

    fn decimate(
        &mut self,
        first: u64,
        end: u64,
        out: &mut ScopeFrame,
        emitted_first: &mut Option<u64>,
    ) {
        let info = self.stream.info();
        let n = (end - first) as usize;
        let bytes = &bytemuck::cast_slice::<u64, u8>(&self.scratch)[..n * info.sample_bytes];
        let mut d = Decimation {
            spc: self.samples_per_column,
            bin: &mut self.bin,
            acc: &mut self.acc,
            out: &mut out.data,
            emitted_first,
            c0: self.cfg.first_channel,
            nch: info.n_channels,
        };
        match info.dtype {
            DType::U8 => d.run::<u8>(first, bytes),
            DType::U16 => d.run::<u16>(first, bytes),
            DType::U32 => d.run::<u32>(first, bytes),
            DType::U64 => d.run::<u64>(first, bytes),
            DType::I8 => d.run::<i8>(first, bytes),
            DType::I16 => d.run::<i16>(first, bytes),
            DType::I32 => d.run::<i32>(first, bytes),
            DType::I64 => d.run::<i64>(first, bytes),
            DType::F32 => d.run::<f32>(first, bytes),
            DType::F64 => d.run::<f64>(first, bytes),
        }
    }

    fn new_events(&mut self, window_start: u64) -> Vec<ScopeEvent> {
        let written = self.stream.events_written();
        let cap = self.stream.info().event_capacity;
        let first = self.next_event.max(written.saturating_sub(cap));
        self.next_event = written;
        if first >= written {
            return Vec::new();
        }
        match self.stream.read_events(first, written) {
            Ok(evs) => (first..)
                .zip(evs.iter())
                .filter(|(_, e)| e.sample >= window_start)
                .map(|(i, e)| scope_event(i, e))
                .collect(),
            // lapped while we read: the page misses these markers, the samples are unaffected
            Err(_) => Vec::new(),
        }
    }
}

/// Samples of a window: seconds at the nominal rate, or thousands of samples without one.
#[must_use]
pub fn window_samples(window_s: f64, rate: f64) -> u64 {
    let per_s = if rate > 0.0 { rate } else { 1000.0 };
    ((window_s * per_s).ceil() as u64).max(1)
}

/// The oldest sample a copy can still expect to find intact: an eighth of the ring is left
/// for the writer to move on while the copy runs.
fn oldest_safe(written: u64, capacity: u64) -> u64 {
    written.saturating_sub(capacity - capacity / 8)
}

/// The first event index whose sample is at or after `start` (events are in sample order).
fn first_event_after(stream: &Stream, start: u64) -> u64 {
    let written = stream.events_written();
    let first = written.saturating_sub(stream.info().event_capacity);
    match stream.read_events(first, written) {
        Ok(evs) => first + evs.iter().take_while(|e| e.sample < start).count() as u64,
        Err(_) => written,
    }
}

fn scope_event(index: u64, e: &Event) -> ScopeEvent {
    ScopeEvent {
        index,
        sample: e.sample,
        kind: value_text(&e.kind),
        value: value_text(&e.value),
    }
}

/// An event's type or value as the page prints it: the text, or the numbers.
fn value_text(v: &EventValue) -> String {
    match (v.as_text(), v.to_f64s()) {
        (Some(t), _) => t.to_owned(),
        (None, Some(xs)) => xs.iter().map(f64::to_string).collect::<Vec<_>>().join(" "),
        (None, None) => String::new(),
    }
}

fn push_bin(out: &mut Vec<f32>, acc: &[[f32; 2]]) {
    out.extend(acc.iter().flat_map(|m| *m));
}

/// A sample type the scope reduces, as f32 (what the page draws).
trait AsF32: bytemuck::Pod {
    fn f32(self) -> f32;
}
macro_rules! as_f32 {
    ($($t:ty),*) => {$(impl AsF32 for $t { #[inline] fn f32(self) -> f32 { self as f32 } })*};
}
as_f32!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);

struct Decimation<'a> {
    spc: u64,
    bin: &'a mut Option<u64>,
    acc: &'a mut Vec<[f32; 2]>,
    out: &'a mut Vec<f32>,
    emitted_first: &'a mut Option<u64>,
    c0: usize,
    nch: usize,
}

impl Decimation<'_> {
    fn run<T: AsF32>(&mut self, first: u64, bytes: &[u8]) {
        let samples: &[T] = bytemuck::cast_slice(bytes);
        let shown = self.acc.len();
        for (i, row) in samples.chunks_exact(self.nch).enumerate() {
            let b = (first + i as u64) / self.spc;
            if *self.bin != Some(b) {
                if let Some(done) = *self.bin {
                    self.emitted_first.get_or_insert(done);
                    push_bin(self.out, self.acc);
                }
                *self.bin = Some(b);
                self.acc.fill([f32::INFINITY, f32::NEG_INFINITY]);
            }
            for (m, v) in self.acc.iter_mut().zip(&row[self.c0..self.c0 + shown]) {
                let v = v.f32();
                m[0] = m[0].min(v);
                m[1] = m[1].max(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtloop_stream::StreamConfig;

    fn stream(name: &str, dtype: DType, nch: usize, rate: f64, cap: u64) -> Stream {
        let mut cfg = StreamConfig::new(dtype, nch, rate, cap);
        cfg.event_capacity = 64;
        Stream::create(name, &cfg).unwrap()
    }

    fn cfg(window_s: f64, columns: u32, first: usize, n: usize) -> ScopeConfig {
        ScopeConfig {
            window_s,
            columns,
            first_channel: first,
            n_channels: n,
        }
    }

    #[test]
    fn bins_hold_the_min_and_max_of_their_samples_and_only_new_bins_are_sent() {
        let name = rtloop_testkit::unique_name("view-scope");
        let s = stream(&name, DType::I16, 3, 1000.0, 8192);
        let mut w = s.writer().unwrap();
        // 1 s over 100 columns: 10 samples a column
        let mut scope = Scope::new(Stream::open(&name).unwrap(), cfg(1.0, 100, 1, 2)).unwrap();
        assert_eq!(scope.samples_per_column(), 10);
        let rows: Vec<i16> = (0..25i16).flat_map(|i| [0, i, -i]).collect();
        w.write(&rows).unwrap();
        let f = scope.frame();
        assert_eq!(
            (f.written, f.first_bin, f.n_bins, f.n_channels),
            (25, 0, 3, 2)
        );
        // bin 0: samples 0-9, bin 1: 10-19, bin 2 (filling): 20-24
        assert_eq!(
            f.data,
            vec![0., 9., -9., 0., 10., 19., -19., -10., 20., 24., -24., -20.]
        );
        assert!(f.newest_stamp_ns.is_some());
        // the next frame resends the filling bin with what joined it
        let rows: Vec<i16> = (25..31i16).flat_map(|i| [0, i, -i]).collect();
        w.write(&rows).unwrap();
        let f = scope.frame();
        assert_eq!((f.first_bin, f.n_bins), (2, 2));
        assert_eq!(f.data, vec![20., 29., -29., -20., 30., 30., -30., -30.]);
        // nothing new: nothing but the filling bin
        let f = scope.frame();
        assert_eq!((f.first_bin, f.n_bins), (3, 1));
        Stream::remove(&name).unwrap();
    }

    #[test]
    fn a_scope_that_fell_behind_skips_to_the_window_and_counts_what_it_skipped() {
        let name = rtloop_testkit::unique_name("view-skip");
        let s = stream(&name, DType::F32, 1, 100.0, 1024);
        let mut w = s.writer().unwrap();
        let mut scope = Scope::new(Stream::open(&name).unwrap(), cfg(1.0, 100, 0, 1)).unwrap();
        let x: Vec<f32> = (0..5000).map(|i| i as f32).collect();
        w.write(&x).unwrap();
        let f = scope.frame();
        // a 100-sample window, one sample a column: the last 101 samples, nothing older
        assert_eq!(f.skipped, 5000 - 101);
        assert_eq!(f.first_bin, 4899);
        assert_eq!(*f.data.last().unwrap(), 4999.0);
        Stream::remove(&name).unwrap();
    }

    #[test]
    fn events_in_the_window_come_once_with_their_samples_and_text() {
        let name = rtloop_testkit::unique_name("view-events");
        let s = stream(&name, DType::F64, 1, 1000.0, 4096);
        let mut w = s.writer().unwrap();
        w.write(&[0.0f64; 100]).unwrap();
        w.push_event(&Event::new("stim", "on", 50)).unwrap();
        let mut scope = Scope::new(Stream::open(&name).unwrap(), cfg(1.0, 100, 0, 1)).unwrap();
        let f = scope.frame();
        assert_eq!(
            f.events,
            vec![ScopeEvent {
                index: 0,
                sample: 50,
                kind: "stim".into(),
                value: "on".into()
            }]
        );
        assert!(scope.frame().events.is_empty());
        Stream::remove(&name).unwrap();
    }

    #[test]
    fn a_closed_or_removed_stream_says_so_and_a_stream_made_again_is_followed() {
        let name = rtloop_testkit::unique_name("view-life");
        let s = stream(&name, DType::F32, 2, 1000.0, 4096);
        let mut scope = Scope::new(Stream::open(&name).unwrap(), cfg(1.0, 100, 1, 1)).unwrap();
        assert_eq!(scope.report_status(), (ScopeStatus::Waiting, true));
        let mut w = s.writer().unwrap();
        w.write(&[1.0f32; 20]).unwrap();
        let pid = std::process::id();
        assert_eq!(scope.report_status(), (ScopeStatus::Live { pid }, true));
        assert_eq!(scope.report_status(), (ScopeStatus::Live { pid }, false));
        // a clean close removes the name: the scope says closed and has nothing to follow
        drop(w);
        assert!(!scope.follow());
        assert_eq!(scope.report_status(), (ScopeStatus::Closed, true));
        // a writer makes the stream again, with fewer channels: followed from channel 0
        let again = stream(&name, DType::F32, 1, 1000.0, 4096);
        let old = scope.incarnation();
        assert!(scope.follow());
        assert_ne!(scope.incarnation(), old);
        assert_eq!(scope.config().first_channel, 0);
        let mut w = again.writer().unwrap();
        w.write(&[7.0f32; 10]).unwrap();
        assert!(matches!(scope.status(), ScopeStatus::Live { .. }));
        assert_eq!(scope.frame().data, vec![7.0, 7.0]);
        // removed while its writer runs: nobody new finds it
        Stream::remove(&name).unwrap();
        assert_eq!(scope.status(), ScopeStatus::Removed);
        assert!(!scope.follow());
    }

    #[test]
    fn configurations_outside_what_a_scope_shows_are_refused_with_the_allowed_range() {
        let name = rtloop_testkit::unique_name("view-refuse");
        let _s = stream(&name, DType::I16, 4, 1000.0, 1024);
        let open = || Stream::open(&name).unwrap();
        let err = |c| Scope::new(open(), c).err().unwrap().to_string();
        assert_eq!(
            err(cfg(0.01, 100, 0, 1)),
            "window 0.01 s is outside 0.1-30 s"
        );
        assert_eq!(err(cfg(1.0, 2, 0, 1)), "2 columns is outside 16-8192");
        assert_eq!(
            err(cfg(1.0, 100, 2, 4)),
            "channels 2..6 are outside the stream's 0..4"
        );
        Stream::remove(&name).unwrap();
    }
}
