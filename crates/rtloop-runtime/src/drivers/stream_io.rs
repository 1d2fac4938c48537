//! `stream_in` (any rtloop stream becomes a signal, e.g. one fed by the FieldTrip server or
//! a recorder's replay) and `stream_out` (a signal becomes a stream other tools can read).

use super::{parse_options, DriverCtx, DriverError, InView, OutBuf, Sink, Source, TickInfo};
use crate::model::Signal;
use rtloop_stream::{ReadError, ReaderMode, Stream, StreamConfig, Writer};

/// `options:` of `stream_in`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct InOptions {
    /// The stream to read (it must exist when the model starts).
    stream: String,
}

/// `options:` of `stream_out`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct OutOptions {
    /// The stream to create.
    stream: String,
    /// Samples it keeps (default: 10 s of the signal, at least 65536).
    capacity: Option<u64>,
    /// Keep it after the model stops (default false: removed).
    #[serde(default)]
    keep: bool,
    /// Replace a stream of that name whose writer is gone (default false: refuse).
    #[serde(default)]
    replace: bool,
}

fn check_name(name: &str) -> Result<(), String> {
    rtloop_stream::validate_name(name).map_err(|e| format!("stream {name:?}: {e}"))
}

/// Validate `stream_in` options.
pub fn check_in(options: &serde_json::Value, signals: &[&Signal]) -> Result<(), String> {
    let o: InOptions = parse_options(options)?;
    check_name(&o.stream)?;
    if signals.len() != 1 {
        return Err(format!("writes exactly one signal, got {}", signals.len()));
    }
    Ok(())
}

/// Validate `stream_out` options.
pub fn check_out(options: &serde_json::Value, signals: &[&Signal]) -> Result<(), String> {
    let o: OutOptions = parse_options(options)?;
    check_name(&o.stream)?;
    if signals.len() != 1 {
        return Err(format!("reads exactly one signal, got {}", signals.len()));
    }
    if o.capacity == Some(0) {
        return Err("capacity must be at least 1 sample".into());
    }
    Ok(())
}

/// Open `stream_in`: the stream must exist with the signal's channels (values per row)
/// and dtype.
pub fn open_in(
    options: &serde_json::Value,
    signals: &[Signal],
    _ctx: &DriverCtx,
) -> Result<Box<dyn Source>, DriverError> {
    let o: InOptions = parse_options(options).map_err(DriverError::Config)?;
    let sig = signals
        .first()
        .ok_or_else(|| DriverError::Config("stream_in writes one signal".into()))?;
    let stream = Stream::open(&o.stream).map_err(|e| DriverError::Stream {
        what: format!("cannot open stream {:?}", o.stream),
        source: Box::new(e.into()),
        hint: format!(" (streams now: {})", Stream::list().join(", ")),
    })?;
    let info = stream.info();
    if info.n_channels != sig.row_len() || info.dtype != sig.dtype {
        return Err(DriverError::Shape {
            stream: o.stream,
            channels: info.n_channels,
            dtype: info.dtype,
            signal: sig.name.clone(),
            needs: sig.row_len(),
            needs_dtype: sig.dtype,
        });
    }
    let reader = stream
        .reader(ReaderMode::Latest)
        .map_err(|e| DriverError::stream(format!("cannot read stream {:?}", o.stream), e))?;
    Ok(Box::new(StreamIn {
        name: o.stream,
        reader,
        variable: sig.variable,
        samples: 0,
        lost: 0,
        stale: 0,
        last_end: 0,
    }))
}

struct StreamIn {
    name: String,
    reader: rtloop_stream::Reader,
    variable: bool,
    samples: u64,
    lost: u64,
    stale: u64,
    last_end: u64,
}

impl Source for StreamIn {
    fn tick(&mut self, _t: &TickInfo, out: &mut [OutBuf<'_>]) -> Result<(), DriverError> {
        let o = &mut out[0];
        let max = o.rows;
        if self.variable {
            // the next new samples in order, up to the signal's rows per tick
            loop {
                match self.reader.pull_into(o.bytes, None, max) {
                    Ok(p) => {
                        o.rows = p.n;
                        self.samples += p.n as u64;
                        return Ok(());
                    }
                    Err(ReadError::Overrun { lost, oldest }) => {
                        self.lost += lost;
                        self.reader.seek(oldest).map_err(|e| {
                            DriverError::stream(format!("stream {:?}", self.name), e)
                        })?;
                    }
                    Err(e) => {
                        return Err(DriverError::stream(format!("stream {:?}", self.name), e))
                    }
                }
            }
        }
        // fixed: the latest `max` samples (zeros before the stream has that many); a copy
        // the writer lapped is retried on the newer samples
        let row = o.bytes.len() / max.max(1);
        for _attempt in 0..8 {
            let written = self.reader.written();
            let n = written.min(max as u64);
            let first = written - n;
            let pad = (max - n as usize) * row;
            o.bytes[..pad].fill(0);
            match self
                .reader
                .read_into(first, written, &mut o.bytes[pad..], None)
            {
                Ok(()) => {
                    if written == self.last_end {
                        self.stale += 1;
                    }
                    self.samples += written - self.last_end.min(written);
                    self.last_end = written;
                    return Ok(());
                }
                Err(ReadError::Overrun { .. } | ReadError::TooOld { .. }) => self.lost += n,
                Err(e) => return Err(DriverError::stream(format!("stream {:?}", self.name), e)),
            }
        }
        Err(DriverError::Data(format!(
            "stream {:?} is written faster than it can be read (lapped 8 times in one tick)",
            self.name
        )))
    }

    fn finish(&mut self) -> Result<String, DriverError> {
        Ok(format!(
            "read {} samples of {:?}, {} lost, {} ticks without new data",
            self.samples, self.name, self.lost, self.stale
        ))
    }
}

/// Open `stream_out`: create the stream (channels = values per row, the signal's dtype).
pub fn open_out(
    options: &serde_json::Value,
    signals: &[Signal],
    ctx: &DriverCtx,
) -> Result<Box<dyn Sink>, DriverError> {
    let o: OutOptions = parse_options(options).map_err(DriverError::Config)?;
    let sig = signals
        .first()
        .ok_or_else(|| DriverError::Config("stream_out reads one signal".into()))?;
    let rate = if sig.variable {
        0.0
    } else {
        sig.rows_per_tick() as f64 / ctx.tick.as_secs_f64()
    };
    let capacity = o
        .capacity
        .unwrap_or_else(|| ((rate * 10.0) as u64).max(65536));
    if let Ok(old) = Stream::open(&o.stream) {
        let alive = matches!(old.stats().writer, rtloop_stream::Liveness::Active { .. });
        drop(old);
        if !o.replace || alive {
            return Err(DriverError::Config(format!(
                "stream {:?} already exists{}; choose another name{}",
                o.stream,
                if alive { " and has a live writer" } else { "" },
                if alive { "" } else { " or set `replace: true`" }
            )));
        }
        let _ = Stream::remove(&o.stream);
    }
    let cfg = StreamConfig {
        // `keep: true` keeps the stream past the writer's close
        keep: o.keep,
        ..StreamConfig::new(sig.dtype, sig.row_len(), rate, capacity)
    };
    let stream = Stream::create(&o.stream, &cfg)
        .map_err(|e| DriverError::stream(format!("cannot create stream {:?}", o.stream), e))?;
    let writer = stream
        .writer()
        .map_err(|e| DriverError::stream(format!("cannot write stream {:?}", o.stream), e))?;
    Ok(Box::new(StreamOut {
        name: o.stream,
        keep: o.keep,
        writer: Some(writer),
        samples: 0,
    }))
}

struct StreamOut {
    name: String,
    keep: bool,
    writer: Option<Writer>,
    samples: u64,
}

impl Sink for StreamOut {
    fn tick(&mut self, t: &TickInfo, inputs: &[InView<'_>]) -> Result<(), DriverError> {
        let w = self.writer.as_mut().expect("open until finish");
        let i = &inputs[0];
        if i.rows > 0 {
            w.write_bytes(i.bytes, Some(t.start_ns))
                .map_err(|e| DriverError::stream(format!("stream {:?}", self.name), e))?;
            self.samples += i.rows as u64;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<String, DriverError> {
        self.writer = None;
        if !self.keep {
            let _ = Stream::remove(&self.name);
        }
        Ok(format!(
            "wrote {} samples to {:?}{}",
            self.samples,
            self.name,
            if self.keep { " (kept)" } else { "" }
        ))
    }
}
