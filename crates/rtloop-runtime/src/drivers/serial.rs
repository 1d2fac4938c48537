//! `serial_out` (sink): a byte, or a short message, per event to a serial port: the TTL
//! trigger boxes built on a USB-serial Arduino or Teensy raise a pin for each byte they read.
//!
//! The event rule: the input is one signal of an integer dtype with one value per row; each
//! row whose value is nonzero is one event (of a `variable` signal, the rows it carries that
//! tick). An event's time is its tick's deadline, so `min_interval_ms` drops the same events
//! on a busy machine as on a quiet one.
//!
//! The port is opened non-blocking and exclusive (`TIOCEXCL`), in raw mode, 8N1, no flow
//! control. Each event is its own `write()`: a port whose buffer is full never blocks the
//! tick, its event is counted as dropped. Per event, the time from the tick's start to its
//! `write()` returning is kept, and `finish` reports p50 / p99 / max.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Duration;

use rtloop_metrics::LatencyHistogram;
use rtloop_stream::DType;
use rustix::fs::{Mode, OFlags};
use rustix::termios::{
    self, ControlModes, InputModes, OptionalActions, QueueSelector, SpecialCodeIndex,
};

use super::{parse_options, DriverCtx, DriverError, InView, Sink, TickInfo};
use crate::model::Signal;

/// The baud rates `serial_out` accepts: Linux's standard rates from 2400 up. 1200 is left out
/// on purpose (see [`BAUD_1200`]).
pub const BAUD_RATES: &[u32] = &[
    2400, 4800, 9600, 19200, 38400, 57600, 115_200, 230_400, 460_800, 500_000, 576_000, 921_600,
    1_000_000, 1_152_000, 1_500_000, 2_000_000, 2_500_000, 3_000_000, 3_500_000, 4_000_000,
];

/// Why 1200 baud is refused.
const BAUD_1200: &str = "1200 baud is left out: opening and closing an Arduino Leonardo, Micro \
     or other ATmega32U4 board's port at 1200 baud resets it into its bootloader";

/// Warnings about dropped events are rate-limited to one per this.
const WARN_EVERY: Duration = Duration::from_secs(1);

/// `options:` of `serial_out`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// The serial device, e.g. `/dev/ttyACM0`.
    port: Option<String>,
    /// Baud rate (default 115200), one of [`BAUD_RATES`].
    #[serde(default = "default_baud")]
    baud: u32,
    /// The byte sent per event, 0-255 (checked here, for a message that says so).
    byte: Option<serde_json::Value>,
    /// The bytes sent per event: a string (its UTF-8 bytes) or a list of bytes.
    message: Option<serde_json::Value>,
    /// Events closer than this after the last one sent are dropped (default 0: none).
    #[serde(default)]
    min_interval_ms: f64,
}

fn default_baud() -> u32 {
    115_200
}

/// Options checked and converted.
struct Checked {
    port: String,
    baud: u32,
    bytes: Vec<u8>,
    min_interval_ns: u64,
}

/// The serial ports there are on this machine, for messages.
fn ports_here() -> String {
    let mut found: Vec<String> = std::fs::read_dir("/dev")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with("ttyACM") || n.starts_with("ttyUSB"))
        .map(|n| format!("/dev/{n}"))
        .collect();
    found.sort();
    if found.is_empty() {
        "no /dev/ttyACM* or /dev/ttyUSB* here (is the device plugged in?)".into()
    } else {
        format!("serial ports here: {}", found.join(", "))
    }
}

fn byte_value(v: &serde_json::Value, what: &str) -> Result<u8, String> {
    v.as_u64()
        .and_then(|b| u8::try_from(b).ok())
        .ok_or_else(|| format!("{what} is {v}; allowed: an integer from 0 to 255"))
}

fn check_options(options: &serde_json::Value) -> Result<Checked, String> {
    let o: Options = parse_options(options)?;
    let Some(port) = o.port else {
        return Err(format!(
            "options: port is missing; give the serial device's path, e.g. /dev/ttyACM0 \
             (USB-CDC: Arduino Leonardo/Micro/Uno R4, Teensy) or /dev/ttyUSB0 (FTDI, CH340); {}",
            ports_here()
        ));
    };
    if !BAUD_RATES.contains(&o.baud) {
        let why = if o.baud == 1200 {
            format!("{BAUD_1200}; ")
        } else {
            String::new()
        };
        return Err(format!(
            "options: baud: {} is not a standard rate; {why}allowed: {}",
            o.baud,
            BAUD_RATES
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let bytes =
        match (&o.byte, &o.message) {
            (Some(_), Some(_)) => return Err(
                "options: byte and message are both given; give one: byte (0-255, one byte per \
                 event) or message (a string or a list of bytes per event)"
                    .into(),
            ),
            (None, None) => {
                return Err(
                    "options: give what to send per event: byte (0-255) or message (a string or a \
                 list of bytes)"
                        .into(),
                )
            }
            (Some(b), None) => vec![byte_value(b, "options: byte")?],
            (None, Some(serde_json::Value::String(s))) => s.as_bytes().to_vec(),
            (None, Some(serde_json::Value::Array(a))) => a
                .iter()
                .enumerate()
                .map(|(i, b)| byte_value(b, &format!("options: message[{i}]")))
                .collect::<Result<_, _>>()?,
            (None, Some(v)) => {
                return Err(format!(
                "options: message is {v}; allowed: a string (sent as its UTF-8 bytes) or a list \
                 of bytes (0-255)"
            ))
            }
        };
    if bytes.is_empty() {
        return Err("options: message is empty; allowed: at least one byte".into());
    }
    if !(o.min_interval_ms.is_finite() && o.min_interval_ms >= 0.0) {
        return Err(format!(
            "options: min_interval_ms is {}; allowed: 0 (every event sent) or more milliseconds",
            o.min_interval_ms
        ));
    }
    let path = Path::new(&port);
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "options: port: {port} does not exist; {}",
                ports_here()
            ));
        }
        Err(e) => return Err(format!("options: port: {port}: {e}")),
        Ok(m) => {
            use std::os::unix::fs::FileTypeExt;
            if !m.file_type().is_char_device() {
                return Err(format!(
                    "options: port: {port} is not a character device (a serial port is, e.g. \
                     /dev/ttyACM0); {}",
                    ports_here()
                ));
            }
        }
    }
    Ok(Checked {
        port,
        baud: o.baud,
        bytes,
        min_interval_ns: (o.min_interval_ms * 1e6).round() as u64,
    })
}

/// Validate `serial_out` options and its signal: one signal of an integer dtype, one value
/// per row.
pub fn check(options: &serde_json::Value, signals: &[&Signal]) -> Result<(), String> {
    check_options(options)?;
    let [s] = signals else {
        return Err(format!(
            "reads one event signal (an integer dtype, one value per row: each nonzero row is \
             one event), got {}",
            signals.len()
        ));
    };
    if matches!(s.dtype, DType::F32 | DType::F64) {
        return Err(format!(
            "event signal {:?} is {}; allowed: an integer dtype (uint8 .. int64), each nonzero \
             row one event (a float is seldom exactly zero: write a 0/1 trigger, e.g. uint8)",
            s.name, s.dtype
        ));
    }
    if s.row_len() != 1 {
        return Err(format!(
            "event signal {:?} has {} values per row (shape {:?}); allowed: one value per row, \
             shape [1] or [rows, 1], each nonzero row one event",
            s.name,
            s.row_len(),
            s.shape
        ));
    }
    Ok(())
}

/// Open the port: non-blocking, exclusive, raw 8N1 at the baud rate, no flow control.
fn open_port(port: &str, baud: u32) -> Result<OwnedFd, DriverError> {
    let fd = rustix::fs::open(
        port,
        OFlags::RDWR | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        let hint = match e {
            rustix::io::Errno::ACCESS => {
                " (add yourself to the group that owns it, usually dialout, and log in again)"
            }
            rustix::io::Errno::BUSY => " (another program has it open exclusively)",
            _ => "",
        };
        DriverError::io(format!("opening serial port {port}{hint}"), e.into())
    })?;
    let mut t = termios::tcgetattr(&fd).map_err(|e| {
        DriverError::io(format!("{port} is not a serial port (tcgetattr)"), e.into())
    })?;
    // another program opening it while the model runs would interleave bytes
    termios::ioctl_tiocexcl(&fd)
        .map_err(|e| DriverError::io(format!("making {port} exclusive"), e.into()))?;
    t.make_raw();
    t.control_modes &= !(ControlModes::CSIZE
        | ControlModes::PARENB
        | ControlModes::CSTOPB
        | ControlModes::CRTSCTS);
    t.control_modes |= ControlModes::CS8 | ControlModes::CREAD | ControlModes::CLOCAL;
    t.input_modes &= !(InputModes::IXON | InputModes::IXOFF | InputModes::IXANY);
    t.special_codes[SpecialCodeIndex::VMIN] = 0;
    t.special_codes[SpecialCodeIndex::VTIME] = 0;
    t.set_speed(baud)
        .map_err(|e| DriverError::io(format!("setting {port} to {baud} baud"), e.into()))?;
    termios::tcsetattr(&fd, OptionalActions::Now, &t)
        .map_err(|e| DriverError::io(format!("setting up {port} (8N1, raw)"), e.into()))?;
    // bytes left from before the model: not this run's events
    termios::tcflush(&fd, QueueSelector::IOFlush)
        .map_err(|e| DriverError::io(format!("flushing {port}"), e.into()))?;
    Ok(fd)
}

/// Open `serial_out`.
pub fn open(
    options: &serde_json::Value,
    signals: &[Signal],
    _ctx: &DriverCtx,
) -> Result<Box<dyn Sink>, DriverError> {
    let c = check_options(options).map_err(DriverError::Config)?;
    let s = signals
        .first()
        .ok_or_else(|| DriverError::Config("serial_out reads one event signal".into()))?;
    let fd = open_port(&c.port, c.baud)?;
    Ok(Box::new(SerialOut {
        fd,
        port: c.port,
        baud: c.baud,
        bytes: c.bytes,
        min_interval_ns: c.min_interval_ns,
        dtype: s.dtype,
        last_sent_ns: None,
        sent: 0,
        dropped_interval: 0,
        dropped_full: 0,
        cut: 0,
        latency: LatencyHistogram::new(),
        last_warn: None,
    }))
}

struct SerialOut {
    fd: OwnedFd,
    port: String,
    baud: u32,
    bytes: Vec<u8>,
    min_interval_ns: u64,
    dtype: DType,
    /// Tick deadline of the last event sent.
    last_sent_ns: Option<u64>,
    sent: u64,
    dropped_interval: u64,
    /// Not sent: the port's buffer was full.
    dropped_full: u64,
    /// Messages only part of which fit in the port's buffer.
    cut: u64,
    /// Tick start to `write()` returned, per event sent.
    latency: LatencyHistogram,
    last_warn: Option<std::time::Instant>,
}

/// Whether row `r` of `b` (one value of `dtype` per row) is nonzero.
fn nonzero(b: &[u8], dtype: DType, r: usize) -> bool {
    let n = dtype.itemsize();
    b[r * n..(r + 1) * n].iter().any(|&x| x != 0)
}

impl SerialOut {
    fn warn_full(&mut self) {
        let now = std::time::Instant::now();
        if self.last_warn.is_none_or(|w| now - w >= WARN_EVERY) {
            self.last_warn = Some(now);
            tracing::warn!(
                "serial_out {}: the port's output buffer is full (is the device reading?); \
                 {} events dropped so far",
                self.port,
                self.dropped_full
            );
        }
    }

    /// One event's bytes; false if the port took none of them.
    fn send(&mut self, t: &TickInfo) -> Result<bool, DriverError> {
        loop {
            match rustix::io::write(&self.fd, &self.bytes) {
                Ok(n) => {
                    let done = rtloop_sys::monotonic_ns();
                    self.latency.record(done.saturating_sub(t.start_ns));
                    if n < self.bytes.len() {
                        self.cut += 1;
                    }
                    return Ok(n > 0);
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => return Ok(false),
                Err(e) => {
                    let hint = if e == rustix::io::Errno::IO {
                        " (was the device unplugged?)"
                    } else {
                        ""
                    };
                    return Err(DriverError::io(
                        format!("writing to serial port {}{hint}", self.port),
                        e.into(),
                    ));
                }
            }
        }
    }
}

impl Sink for SerialOut {
    fn tick(&mut self, t: &TickInfo, inputs: &[InView<'_>]) -> Result<(), DriverError> {
        let i = &inputs[0];
        for r in 0..i.rows {
            if !nonzero(i.bytes, self.dtype, r) {
                continue;
            }
            if let Some(last) = self.last_sent_ns {
                if t.deadline_ns.saturating_sub(last) < self.min_interval_ns {
                    self.dropped_interval += 1;
                    continue;
                }
            }
            if self.send(t)? {
                self.sent += 1;
                self.last_sent_ns = Some(t.deadline_ns);
            } else {
                self.dropped_full += 1;
                self.warn_full();
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<String, DriverError> {
        let s = self.latency.summary();
        let us = |ns: u64| format!("{:.1}", ns as f64 / 1e3);
        let latency = if s.count == 0 {
            "no latency (nothing sent)".to_string()
        } else {
            format!(
                "tick start to write returned p50 {} µs, p99 {} µs, max {} µs",
                us(s.p50_ns),
                us(s.p99_ns),
                us(s.max_ns)
            )
        };
        let cut = if self.cut > 0 {
            format!(", {} messages cut short (port buffer full)", self.cut)
        } else {
            String::new()
        };
        Ok(format!(
            "sent {} events to {} at {} baud ({} bytes each); dropped {} within min_interval_ms, \
             {} on a full port{cut}; {latency}",
            self.sent,
            self.port,
            self.baud,
            self.bytes.len(),
            self.dropped_interval,
            self.dropped_full
        ))
    }
}
